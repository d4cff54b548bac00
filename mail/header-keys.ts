// nodemailer's MimeNode normalizes a header's name (three regular expressions) every time a part sets, gets or
// builds a header: some 80 times a composed message, ~6% of the control's CPU a 1 KB send in a profile and 10-25 µs
// a message in-process (bench/compose.ts). The method is a pure function of the name (it reads no state), so its
// answers are kept: the names MailComposer sets and the few a sender adds, at most KEEP of them; a name after that
// is normalized every time, as before. This replaces an internal method (nodemailer is pinned by package.json):
// test/mail/header-keys.test.ts holds every answer against the unpatched method of nodemailer's CommonJS build.
import MimeNode from 'nodemailer/lib/mime-node';

type Normalize = (this: unknown, key: unknown) => string;
const proto = MimeNode.prototype as unknown as { _normalizeHeaderKey: Normalize };
const normalize = proto._normalizeHeaderKey;

/** Header names are few (MailComposer's own and those senders add); this bounds the map whatever senders send. */
const KEEP = 512;
const known = new Map<string, string>();

/** MimeNode's `_normalizeHeaderKey`, remembering its answers; what compose's parts call (one patch, on import). */
export function normalizeHeaderKey(this: unknown, key: unknown): string {
  if (typeof key !== 'string') return normalize.call(this, key);
  let name = known.get(key);
  if (name === undefined) {
    name = normalize.call(this, key);
    if (known.size < KEEP) known.set(key, name);
  }
  return name;
}
proto._normalizeHeaderKey = normalizeHeaderKey;
