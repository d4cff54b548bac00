// Password hashing (docs/decisions.md #12): scrypt, memory-hard, from node:crypto, so nothing native
// needs installing. Parameters are stored with each hash, so they can be raised without a migration.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const scrypt = (pw: string, salt: Buffer, len: number, o: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) => scryptCb(pw, salt, len, o, (e, k) => (e ? reject(e) : resolve(k))));

// N=2^15, r=8: 32 MiB and 50–200 ms per hash (RFC 7914 §2 for the parameters). Tests pass a lower
// cost (bin/start.ts StartOptions.passwordLogN): hashes carry their parameters, so both verify alike.
export const LOG_N = 15;
const R = 8;
const P = 1;
const KEY_LEN = 32;
const maxmem = (logN: number, r: number) => 256 * r * 2 ** logN + 1024 * 1024;

export async function hashPassword(password: string, logN = LOG_N): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize('NFC'), salt, KEY_LEN, {
    N: 2 ** logN,
    r: R,
    p: P,
    maxmem: maxmem(logN, R),
  });
  return `scrypt$${logN}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, logN, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await scrypt(password.normalize('NFC'), Buffer.from(salt, 'base64'), expected.length, {
    N: 2 ** Number(logN),
    r: Number(r),
    p: Number(p),
    maxmem: maxmem(Number(logN), Number(r)),
  });
  return timingSafeEqual(key, expected);
}

/** A hash of nothing anyone knows: verified against when the account does not exist, to keep timing alike. */
export const unusableHash = (logN = LOG_N) =>
  `scrypt$${logN}$${R}$${P}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(KEY_LEN).toString('base64')}`;
