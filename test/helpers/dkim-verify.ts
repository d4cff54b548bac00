// DKIM through an independent implementation: Debian's python3-dkim (dkimpy), run by /usr/bin/python3
// (the python3 on PATH may be a pyenv without the module). DNS is answered from a map through dkimpy's
// dnsfunc hook, and dnspython is kept from loading at all, so nothing reaches the network.
//
//   const { signatures } = await verifyDkim(raw, { 'sel._domainkey.example.test': 'v=DKIM1; k=rsa; p=…' });
//   // [{ domain: 'example.test', selector: 'sel', algorithm: 'rsa-sha256', ok: true }]
//
// Ed25519 (RFC 8463) needs python3-nacl beside python3-dkim.
import { execFile } from 'node:child_process';
import { createPrivateKey, type KeyObject } from 'node:crypto';

const PYTHON = '/usr/bin/python3';

export interface DkimSignatureResult {
  /** d= */
  domain: string;
  /** s= */
  selector: string;
  /** a=, e.g. rsa-sha256 or ed25519-sha256 */
  algorithm: string;
  ok: boolean;
  /** Why it failed, in dkimpy's words (e.g. "body hash mismatch …", "missing public key: …"). */
  error?: string;
}

export interface DkimVerifyResult {
  /** One entry per DKIM-Signature header field, top first. */
  signatures: DkimSignatureResult[];
  /** The TXT names dkimpy asked for, lower case without the trailing dot. */
  lookups: string[];
}

export interface PythonSignOptions {
  domain: string;
  selector: string;
  /** RSA or Ed25519 private key (PEM or KeyObject); the algorithm follows the key. */
  privateKey: string | KeyObject;
  /** header/body canonicalization (default relaxed/relaxed). */
  canonicalization?: `${'relaxed' | 'simple'}/${'relaxed' | 'simple'}`;
  /** Header fields to sign; dkimpy's default set when absent. */
  headers?: string[];
}

// The request comes in as JSON on stdin; one JSON line goes out. Blocking the dns package makes
// dkimpy's default resolver unusable (and saves the 0.5 s dnspython takes to import).
const SCRIPT = String.raw`
import sys
sys.modules['dns'] = None
sys.modules['DNS'] = None
import base64, json, logging
import dkim
from dkim.util import parse_tag_value

req = json.load(sys.stdin)
msg = base64.b64decode(req['message']) if 'message' in req else b''

def text(v):
    return v.decode('utf-8', 'replace') if isinstance(v, bytes) else str(v)

if req['op'] == 'sign':
    hc, bc = req['canonicalization'].split('/')
    key = req['key'].encode()
    headers = [h.encode() for h in req['headers']] if req.get('headers') else None
    sig = dkim.sign(msg, req['selector'].encode(), req['domain'].encode(), key,
                    canonicalize=(hc.encode(), bc.encode()), signature_algorithm=req['algorithm'].encode(),
                    include_headers=headers, linesep=b'\r\n')
    print(json.dumps({'header': base64.b64encode(sig).decode()}))
    sys.exit(0)

txt = {k.lower().rstrip('.'): v for k, v in req['txt'].items()}
lookups = []
def dnsfunc(name, timeout=5):
    n = text(name).lower().rstrip('.')
    lookups.append(n)
    v = txt.get(n)
    return v.encode() if v is not None else None

class Errors(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
    def emit(self, record):
        self.messages.append(record.getMessage())

def verify(msg):
    headers, _ = dkim.rfc822_parse(msg)
    sigs = [v for k, v in headers if k.lower() == b'dkim-signature']
    out = []
    for i, value in enumerate(sigs):
        entry = {'domain': '', 'selector': '', 'algorithm': ''}
        try:
            tags = parse_tag_value(value)
            entry.update(
                domain=text(tags.get(b'd', b'')),
                selector=text(tags.get(b's', b'')),
                algorithm=text(tags.get(b'a', b'')),
            )
        except Exception:
            pass
        errors = Errors()
        logger = logging.getLogger('dkim-verify-%d' % i)
        logger.propagate = False
        logger.addHandler(errors)
        try:
            ok = bool(dkim.DKIM(msg, logger=logger).verify(idx=i, dnsfunc=dnsfunc))
            if not ok:
                entry['error'] = '; '.join(errors.messages) or 'signature (b=) does not verify'
        except dkim.DKIMException as e:
            ok = False
            entry['error'] = '%s: %s' % (type(e).__name__, e)
        entry['ok'] = ok
        out.append(entry)
    return out

if req['op'] == 'verify_many':
    print(json.dumps({'results': [verify(base64.b64decode(m)) for m in req['messages']], 'lookups': lookups}))
else:
    print(json.dumps({'signatures': verify(msg), 'lookups': lookups}))
`;

function python<T>(request: Record<string, unknown>): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      PYTHON,
      ['-I', '-c', SCRIPT],
      { maxBuffer: 64 * 1024 * 1024, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) {
          const hint = /No module named '?(dkim|nacl)/.test(stderr)
            ? ' (apt-get install python3-dkim python3-nacl)'
            : '';
          reject(new Error(`${PYTHON} dkim failed${hint}: ${stderr.trim() || err.message}`));
          return;
        }
        try {
          resolve(JSON.parse(stdout) as T);
        } catch {
          reject(new Error(`${PYTHON} dkim: unreadable output: ${stdout.slice(0, 500)} ${stderr.slice(0, 500)}`));
        }
      },
    );
    child.stdin?.end(JSON.stringify(request));
  });
}

/**
 * Verifies every DKIM-Signature of `raw` with dkimpy. `txt` maps `<selector>._domainkey.<domain>` to
 * the TXT record (the character-strings joined); a name missing from it is NXDOMAIN.
 */
export function verifyDkim(raw: Buffer, txt: Readonly<Record<string, string>>): Promise<DkimVerifyResult> {
  return python<DkimVerifyResult>({ op: 'verify', message: raw.toString('base64'), txt });
}

/** Verifies many messages in one python process (0.1 s to start, milliseconds per message after). */
export async function verifyDkimAll(
  raws: readonly Buffer[],
  txt: Readonly<Record<string, string>>,
): Promise<DkimSignatureResult[][]> {
  if (raws.length === 0) return [];
  const { results } = await python<{ results: DkimSignatureResult[][] }>({
    op: 'verify_many',
    messages: raws.map((r) => r.toString('base64')),
    txt,
  });
  return results;
}

/**
 * Signs with dkimpy's own dkim.sign and returns the DKIM-Signature header field (CRLF-terminated) to
 * put in front of `raw`: a second, independent signer for tests of our verifier.
 */
export async function pythonDkimSign(raw: Buffer, opts: PythonSignOptions): Promise<Buffer> {
  const key = typeof opts.privateKey === 'string' ? createPrivateKey(opts.privateKey) : opts.privateKey;
  let algorithm: string;
  let keyText: string;
  if (key.asymmetricKeyType === 'rsa') {
    // dkimpy reads a PKCS#1 RSAPrivateKey PEM.
    algorithm = 'rsa-sha256';
    keyText = key.export({ type: 'pkcs1', format: 'pem' }).toString();
  } else if (key.asymmetricKeyType === 'ed25519') {
    // dkimpy (through PyNaCl) takes the base64 of the 32-byte seed, as dknewkey writes it.
    algorithm = 'ed25519-sha256';
    const d = key.export({ format: 'jwk' }).d;
    if (!d) throw new Error('pythonDkimSign: the ed25519 key has no private part');
    keyText = Buffer.from(d, 'base64url').toString('base64');
  } else {
    throw new Error(`pythonDkimSign: unsupported key type ${key.asymmetricKeyType}`);
  }
  const { header } = await python<{ header: string }>({
    op: 'sign',
    message: raw.toString('base64'),
    domain: opts.domain,
    selector: opts.selector,
    key: keyText,
    algorithm,
    canonicalization: opts.canonicalization ?? 'relaxed/relaxed',
    headers: opts.headers ?? null,
  });
  return Buffer.from(header, 'base64');
}
