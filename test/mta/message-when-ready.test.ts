// The pools' send takes the message as a function, called once a session is ready for it (mta/outbound/pool.ts,
// docs/decisions.md #76): a message waiting for a session holds no copy of its body. Real DNS, a real SMTP sink.
import t from 'tap';
import pino from 'pino';
import { createResolver } from '../../mail/dns.js';
import { systemClock } from '../../mail/clock.js';
import { parseHostPort, type HostPort } from '../../config/schema.js';
import { createPools } from '../../mta/outbound/pool.js';
import { startDestination } from '../helpers/delivery-world.js';

const message = (subject: string) =>
  Buffer.from(`From: a@sender.test\r\nTo: b@dest.test\r\nSubject: ${subject}\r\n\r\nhello\r\n`);

t.test('made once, when its session is ready; a message gone or unreadable fails its attempt alone', async (t) => {
  const { zone, sink } = await startDestination(t, { tls: false });
  const pools = createPools({
    resolver: createResolver({ servers: [parseHostPort(zone.hostPort, 53) as HostPort], clock: systemClock }),
    log: pino({ level: 'silent' }),
    hostname: 'mta.sender.test',
    port: sink.port,
    allowPrivateMx: true,
    // One session: the second send waits for the first to finish with it.
    maxSessionsPerHost: 1,
  });
  t.teardown(() => pools.close());
  const dest = { domain: 'dest.test', source: null };

  // What the sink had received when each message was made.
  const madeWhen: Record<string, number> = {};
  const made = (subject: string) => () => {
    t.notOk(subject in madeWhen, `${subject} made once`);
    madeWhen[subject] = sink.messages.length;
    return message(subject);
  };
  const [first, second] = await Promise.all([
    pools.send(dest, 'a@sender.test', 'b@dest.test', made('first')),
    pools.send(dest, 'a@sender.test', 'b@dest.test', made('second')),
  ]);
  t.equal(first.kind, 'accepted');
  t.equal(second.kind, 'accepted');
  t.same(madeWhen, { first: 0, second: 1 }, 'the second made only after the first was received, on its session');

  const gone = await pools.send(dest, 'a@sender.test', 'b@dest.test', () => undefined);
  t.equal(gone.kind, 'connection');
  t.match(gone.kind === 'connection' ? gone.error : '', /message body missing from the spool/);
  const unread = await pools.send(dest, 'a@sender.test', 'b@dest.test', () => {
    throw new Error('database closed');
  });
  t.equal(unread.kind, 'connection');
  t.match(unread.kind === 'connection' ? unread.error : '', /not read from the spool: database closed/);
  // The session was given back untouched: the next message goes over the same connection.
  const after = await pools.send(dest, 'a@sender.test', 'b@dest.test', message('third'));
  t.equal(after.kind, 'accepted');
  t.equal(sink.connections, 1, 'one connection for all of them');
  t.same(
    sink.messages.map((m) => /Subject: (\w+)/.exec(m.raw.toString())?.[1]),
    ['first', 'second', 'third'],
  );
});
