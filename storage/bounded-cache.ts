// Small in-process caches that forget everything once they hold `max` entries: for values that are
// cheap to find again (a lookup, a decryption) and, where they come from the database, re-checked on
// use. Each lives on a storage handle (storage/caches.ts): tests run several services in one process.
export interface BoundedCache<V> {
  get(key: string): V | undefined;
  set(key: string, value: V): void;
  delete(key: string): void;
}

export function boundedCache<V>(max = 10_000): BoundedCache<V> {
  const map = new Map<string, V>();
  return {
    get: (key) => map.get(key),
    set(key, value) {
      if (map.size >= max && !map.has(key)) map.clear();
      map.set(key, value);
    },
    delete: (key) => void map.delete(key),
  };
}
