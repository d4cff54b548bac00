// The MTA's SMTP client (mta/outbound/smtp-connection.ts) beside nodemailer's unmodified SMTPConnection, whose
// internals it reaches: the CPU this process spends a message sending the same composed message over
// `--connections` sessions (PIPELINING, as Postfix's smtp-sink offers it) to one smtp-sink, in alternated rounds.
//
//   node --import ./bin/resolve-sources.ts bench/smtp-client.ts [--messages 20000] [--connections 8]
//        [--rounds 6] [--size 1k|10k|100k|1m]
//
// A round sends `--messages` with one client and then with the other (the first alternating), after 3,000
// untimed ones each at the start. Prints each client's CPU a message (this process's, every thread, from
// process.cpuUsage: the sink is another process) as the median and range of the rounds, and the ratio taken round
// by round. Needs Debian's postfix (smtp-sink).
import { parseArgs } from 'node:util';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { SmtpConnection } from '../mta/outbound/smtp-connection.js';
import { composeMessage } from '../mail/compose.js';
import { markCrlfOnly } from '../mail/smtp-data.js';
import { startSink } from './sink.js';
import { SUBJECT, textOfSize } from './service.js';
import { medianRange } from './util.js';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    connections: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '6' },
    size: { type: 'string', default: '1k' },
  },
});
const N = Number(args.messages);
const CONNECTIONS = Number(args.connections);
const ROUNDS = Number(args.rounds);

const message = await composeMessage({
  from: { name: 'Bench', address: 'bench@example.test' },
  to: 'someone@dest.test',
  subject: SUBJECT,
  messageId: 'f0e1d2c3-b4a5-4697-8899-aabbccddeeff@example.test',
  date: new Date(Date.UTC(2026, 11, 5, 12, 0, 0)),
  text: textOfSize(args.size!),
});

type Client = typeof SMTPConnection;
const clients: [string, Client][] = [
  ['nodemailer', SMTPConnection],
  ['ours', SmtpConnection],
];

const sink = await startSink('smtp-client');
let delivered = 0;

async function connect(Client: Client): Promise<SMTPConnection> {
  const c = new Client({ host: '127.0.0.1', port: sink.port, ignoreTLS: true, name: 'client.bench.test' });
  await new Promise<void>((resolve, reject) => {
    c.once('error', reject);
    c.connect(() => resolve());
  });
  return c;
}

/** `n` messages over CONNECTIONS sessions of `Client`, each sending its share one after the other. */
async function send(Client: Client, n: number): Promise<number> {
  const sessions = await Promise.all(Array.from({ length: CONNECTIONS }, () => connect(Client)));
  let next = 0;
  const t0 = process.cpuUsage();
  await Promise.all(
    sessions.map(async (c) => {
      while (next < n) {
        next++;
        // A copy marked as the MTA marks a composed message (every CR and LF in a CRLF pair, mail/smtp-data.ts).
        const raw = markCrlfOnly(Buffer.from(message));
        await new Promise<void>((resolve, reject) =>
          c.send({ from: 'bounce@example.test', to: ['someone@dest.test'], size: raw.length }, raw, (err) =>
            err ? reject(err) : resolve(),
          ),
        );
      }
    }),
  );
  const d = process.cpuUsage(t0);
  for (const c of sessions) c.quit();
  delivered += n;
  await sink.reached(delivered, 60_000);
  await sink.clear(n);
  return (d.user + d.system) / 1000 / n;
}

const range = (xs: number[], f: (x: number) => string) => {
  const { median, min, max } = medianRange(xs);
  return `${f(median)} (${f(min)}–${f(max)})`;
};

try {
  for (const [, Client] of clients) await send(Client, 3000);
  const ms: Record<string, number[]> = { nodemailer: [], ours: [] };
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...clients].reverse() : clients;
    for (const [name, Client] of order) ms[name]!.push(await send(Client, N));
    ratios.push(ms.ours![r]! / ms.nodemailer![r]!);
  }
  const µs = (x: number) => `${(x * 1000).toFixed(1)} µs`;
  console.log(
    `smtp-client: ${ROUNDS} alternated rounds of ${N} messages of ${args.size} (${message.length} octets) over ` +
      `${CONNECTIONS} sessions to smtp-sink; CPU of this process a message, median (range)`,
  );
  for (const [name] of clients) console.log(`  ${name.padEnd(10)} ${range(ms[name]!, µs)}`);
  console.log(`  ours / nodemailer ${range(ratios, (x) => `${x.toFixed(2)}×`)}`);
} finally {
  await sink.stop();
}
