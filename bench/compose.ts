// Micro-benchmark of a sendEmail's CPU per message by stage: compileMessage (checks and nodemailer's tree),
// serializeMime (transfer encoding and framing), the wire check, and DKIM signing (mail/dkim-sign.ts, as the
// MTA worker does it), for text, html and text+html bodies of 1 kB, 10 kB and 100 kB (or 1m). serializeMime joins the
// whole message into one string at any size; composeMessage, the whole, takes one over 127 KiB a chunk at a time
// (docs/decisions.md #85), so at 1m its figure is below its serialize's.
//
//   node --import ./bin/resolve-sources.ts bench/compose.ts [--n 2000] [--sizes 1k,10k,100k,1m]
//        [--kinds text,html,both,utf8]
//
// Bodies are bench/service.ts's (lines of 80 ordinary characters, so quoted-printable), the html the same
// lines in <p>, and `utf8` the text with a non-ASCII word on every line. Figures are ms per message, the
// median of five rounds of n/5 messages, in CPU time; run it under `node --cpu-prof` for the profile.
import { parseArgs } from 'node:util';
import { createPrivateKey } from 'node:crypto';
import { compileMessage, serializeMime, composeMessage, type ComposeInput } from '../mail/compose.js';
import { dkimSign } from '../mail/dkim-sign.js';
import { generateDkimKey } from '../mail/dkim-keys.js';
import { htmlOf, SIZES, textOfSize } from './service.js';
import { median } from './util.js';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '2000' },
    sizes: { type: 'string', default: '1k,10k,100k' },
    kinds: { type: 'string', default: 'text,html,both' },
  },
});
const N = Number(args.n);
const ROUNDS = 5;

const key = await generateDkimKey('rsa');
const keys = [{ domain: 'example.test', selector: key.selector, key: createPrivateKey(key.privatePem) }];

function input(kind: string, size: string): ComposeInput {
  const text = textOfSize(size);
  const base: ComposeInput = {
    from: { name: 'Bench', address: 'bench@example.test' },
    to: 'someone@dest.test',
    subject: 'Your sign-in code',
    messageId: 'f0e1d2c3-b4a5-4697-8899-aabbccddeeff@example.test',
    date: new Date(Date.UTC(2026, 10, 26, 12, 0, 0)),
    headers: { 'Feedback-ID': 'a:b:svc' },
  };
  const html = htmlOf(text);
  if (kind === 'text') return { ...base, text };
  if (kind === 'html') return { ...base, html };
  if (kind === 'both') return { ...base, text, html };
  if (kind === 'utf8') return { ...base, text: text.replace(/\n/g, ' Grüße – ünïcode\n') };
  throw new Error(`unknown kind ${kind}`);
}

// CPU time of this process, not wall time: the machine is shared, and another process's turn on the core is
// not ours. (Its caches and the GC of our own garbage still count.) A call that returns a promise is awaited before
// the next, and a signature made on the thread pool counts too: process CPU is every thread's.
async function time(fn: () => unknown, n: number): Promise<number> {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const r = fn();
    if (r instanceof Promise) await r;
  }
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1000 / n;
}

const rows: Record<string, unknown>[] = [];
for (const kind of args.kinds!.split(',')) {
  for (const size of args.sizes!.split(',')) {
    const m = input(kind, size);
    // Fewer rounds of the large sizes: the same total of bytes, at least 50 messages.
    const n = Math.max(50, Math.round((N * 1024) / SIZES[size]!) * (size === '1k' ? 1 : 4));
    const per = Math.max(10, Math.floor(n / ROUNDS));
    const raw = await composeMessage(m);
    const st = { compile: [] as number[], serialize: [] as number[], compose: [] as number[], sign: [] as number[] };
    // One warm-up round of each.
    for (let r = 0; r <= ROUNDS; r++) {
      const c = await time(() => compileMessage(m), per);
      const root = compileMessage(m);
      const s = await time(() => serializeMime(root), per);
      const all = await time(() => void composeMessage(m), per);
      const sg = await time(() => dkimSign(raw, keys, Date.now()), per);
      if (r === 0) continue;
      st.compile.push(c);
      st.serialize.push(s);
      st.compose.push(all);
      st.sign.push(sg);
    }
    const row = {
      kind,
      size,
      bytes: raw.length,
      compile: median(st.compile),
      serialize: median(st.serialize),
      compose: median(st.compose),
      sign: median(st.sign),
    };
    rows.push(row);
    console.log(
      `${kind.padEnd(5)} ${size.padStart(4)} ${String(raw.length).padStart(7)} B  compile ${row.compile.toFixed(3)}  ` +
        `serialize ${row.serialize.toFixed(3)}  compose ${row.compose.toFixed(3)}  sign ${row.sign.toFixed(3)}  ` +
        `total ${(row.compose + row.sign).toFixed(3)} ms/msg`,
    );
  }
}
