// The master key and the sealing of secrets the server must use again (HMAC secrets, DKIM keys,
// mail carrying one-time links). AES-256-GCM; the associated data binds a sealed value to its row,
// so a ciphertext copied into another row does not open.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { open, readFile, mkdir, link, unlink } from 'node:fs/promises';
import path from 'node:path';

export interface Sealer {
  seal(plaintext: string, aad: string): string;
  open(sealed: string, aad: string): string;
  /**
   * HMAC-SHA256 (hex) of `data` under a key of its own for each `purpose`, derived from the master key
   * (HMAC(master, "svc-mail mac " + purpose)): a tag only this service can make, e.g. in a return path.
   */
  mac(purpose: string, data: string): string;
}

const VERSION = 'v1';

export function createSealer(key: Buffer): Sealer {
  if (key.length !== 32) throw new Error('master key must be 32 bytes');
  // The keys as KeyObjects, made once: on Node 24, createHmac and createCipheriv given a Buffer key spend ~20 µs
  // a call deciding that it is not a KeyObject (measured: 20 µs against 2 with a KeyObject), and `mac` runs for
  // every message sent (its VERP return path, mail/verp.ts).
  const master = createSecretKey(key);
  const macKeys = new Map<string, KeyObject>();
  return {
    mac(purpose, data) {
      let k = macKeys.get(purpose);
      if (!k) {
        k = createSecretKey(createHmac('sha256', master).update(`svc-mail mac ${purpose}`).digest());
        macKeys.set(purpose, k);
      }
      return createHmac('sha256', k).update(data).digest('hex');
    },
    seal(plaintext, aad) {
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', master, iv);
      c.setAAD(Buffer.from(aad));
      const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
      return `${VERSION}.${Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64')}`;
    },
    open(sealed, aad) {
      const [version, body] = sealed.split('.');
      if (version !== VERSION || !body) throw new Error('unknown sealed format');
      const buf = Buffer.from(body, 'base64');
      const d = createDecipheriv('aes-256-gcm', master, buf.subarray(0, 12));
      d.setAAD(Buffer.from(aad));
      d.setAuthTag(buf.subarray(12, 28));
      return Buffer.concat([d.update(buf.subarray(28)), d.final()]).toString('utf8');
    },
  };
}

/**
 * SVC_MASTER_KEY when set; otherwise the key file in the data directory, created on first start
 * (mode 0600, exclusive create so two processes starting together agree on one key).
 */
export async function loadMasterKey(configured: Buffer | null, dataDir: string): Promise<Buffer> {
  if (configured) return configured;
  const file = path.join(dataDir, 'master.key');
  await mkdir(dataDir, { recursive: true });
  // Write a temporary file, sync it, then link it into place: link fails if another process won the
  // race, and nobody ever reads a half-written key.
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const fh = await open(tmp, 'wx', 0o600);
  await fh.writeFile(randomBytes(32).toString('base64') + '\n');
  await fh.sync();
  await fh.close();
  try {
    await link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(tmp);
  }
  const key = Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
  if (key.length !== 32) throw new Error(`${file} does not hold base64 of 32 bytes`);
  return key;
}
