// Small in-process caches that forget everything once they hold `max` entries: for values that are
// cheap to find again (a lookup, a decryption) and, where they come from the database, re-checked on
// use. `perDatabase` keeps one per database: tests run several services in one process.
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

export function perDatabase<V>(max = 10_000): (db: object) => BoundedCache<V> {
  const caches = new WeakMap<object, BoundedCache<V>>();
  return (db) => {
    let cache = caches.get(db);
    if (!cache) caches.set(db, (cache = boundedCache<V>(max)));
    return cache;
  };
}
