// The platform's DKIM keys (migration 0020; docs/operations.md, "Platform mail"): one row per notify domain and
// algorithm. Rows are only ever added: the first process to insert one wins, the others read it.
import type { DkimAlgorithm } from '../../mail/dkim-keys.js';
import type { Queryable } from './client.js';

export interface PlatformKeyRow {
  domain: string;
  algorithm: DkimAlgorithm;
  selector: string;
  privateSealed: string;
  publicKey: string;
}

/** The domain's keys, RSA first (the signature most verifiers can check comes first). */
export async function platformKeyRows(q: Queryable, domain: string): Promise<PlatformKeyRow[]> {
  return q.query<PlatformKeyRow>(
    `SELECT domain, algorithm, selector, private_sealed AS "privateSealed", public_key AS "publicKey"
     FROM platform_dkim_keys WHERE domain = $1 ORDER BY algorithm = 'rsa' DESC, algorithm`,
    [domain],
  );
}

/** Adds a key unless the domain has one of that algorithm already (a concurrent first start keeps the first). */
export async function insertPlatformKey(q: Queryable, row: PlatformKeyRow, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO platform_dkim_keys (domain, algorithm, selector, private_sealed, public_key, created_at)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (domain, algorithm) DO NOTHING`,
    [row.domain, row.algorithm, row.selector, row.privateSealed, row.publicKey, now],
  );
}
