// A pino logger that keeps what the service logs, parsed, for a test to read.
//
//   const logged = logLines();
//   const svc = await startTestService(t, { log: logged.log });
//   ... logged.lines.filter((l) => l.msg === 'delivery attempt')
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

export function logLines(level = 'info'): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level }, sink), lines };
}
