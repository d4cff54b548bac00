// The certificate the MX and IMAP listeners offer (SVC_TLS_CERT, SVC_TLS_KEY): read at start into a
// tls.SecureContext, and read again on demand (SIGHUP, bin/start.ts) so that a renewed certificate is
// taken without a restart. A reload that fails keeps the certificate in use: a half-written file during
// a renewal must not take TLS away from the listeners.
import { readFile } from 'node:fs/promises';
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { ConfigError } from './load.js';
import type { Config } from './schema.js';

export interface Certificate {
  /** PEM as read: smtp-server builds its own contexts from these (updateSecureContext). */
  key: Buffer;
  cert: Buffer;
  context: SecureContext;
  /** SHA-256 fingerprint of the leaf certificate, "AB:CD:…", as node:crypto prints it. */
  fingerprint256: string;
  subject: string;
  validTo: Date;
}

export interface TlsCertificates {
  current(): Certificate;
  /** Reads the files again; resolves with the new certificate, or throws and keeps the old one. */
  reload(): Promise<Certificate>;
  /** Called with each certificate a reload swaps in; returns the unsubscribe function. */
  onChange(listener: (c: Certificate) => void): () => void;
}

/** One line saying what is wrong with which file (no PEM content, only paths and OpenSSL's reason). */
export class CertificateError extends Error {
  override name = 'CertificateError';
}

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0];

/** Reads and checks a certificate and its key; throws a CertificateError naming the variable at fault. */
export async function readCertificate(certPath: string, keyPath: string): Promise<Certificate> {
  const read = async (variable: string, path: string) => {
    try {
      return await readFile(path);
    } catch (err) {
      throw new CertificateError(
        `${variable} ${path}: cannot be read (${(err as { code?: string }).code ?? reason(err)})`,
      );
    }
  };
  const [cert, key] = await Promise.all([read('SVC_TLS_CERT', certPath), read('SVC_TLS_KEY', keyPath)]);
  let leaf: X509Certificate;
  try {
    // The first certificate of the file is the leaf; the rest is its chain (RFC 8446 §4.4.2 order).
    leaf = new X509Certificate(cert);
  } catch (err) {
    throw new CertificateError(`SVC_TLS_CERT ${certPath}: not a PEM certificate (${reason(err)})`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new CertificateError(`SVC_TLS_KEY ${keyPath}: not a PEM private key (${reason(err)})`);
  }
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new CertificateError(`SVC_TLS_KEY ${keyPath}: not the key of the certificate in SVC_TLS_CERT ${certPath}`);
  }
  let context: SecureContext;
  try {
    context = createSecureContext({ key, cert });
  } catch (err) {
    throw new CertificateError(`SVC_TLS_CERT ${certPath}: refused by TLS (${reason(err)})`);
  }
  return {
    key,
    cert,
    context,
    fingerprint256: leaf.fingerprint256,
    subject: leaf.subject.replace(/\n/g, ', '),
    validTo: new Date(leaf.validTo),
  };
}

/**
 * The certificates of the configuration, or null when none is configured (no STARTTLS). A file that
 * cannot be used stops the start: a ConfigError with one line, as for any bad variable.
 */
export async function loadTls(config: Pick<Config, 'tlsCert' | 'tlsKey'>): Promise<TlsCertificates | null> {
  const { tlsCert, tlsKey } = config;
  if (tlsCert === null || tlsKey === null) return null;
  let cert: Certificate;
  try {
    cert = await readCertificate(tlsCert, tlsKey);
  } catch (err) {
    if (err instanceof CertificateError) throw new ConfigError([`invalid configuration: ${err.message}`]);
    throw err;
  }
  const listeners = new Set<(c: Certificate) => void>();
  return {
    current: () => cert,
    async reload() {
      const next = await readCertificate(tlsCert, tlsKey);
      cert = next;
      for (const l of listeners) l(next);
      return next;
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
