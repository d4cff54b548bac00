#!/usr/bin/env -S node --import=./bin/resolve-sources.ts --max-semi-space-size=32
// The `svc` command: argv → subcommand. Exit codes: 0 done, 1 failed, 2 bad usage or configuration.
import './thread-pool.js';
import './heap-marking.js';
import { parseArgs } from 'node:util';
import { loadConfig, describeConfig, ConfigError } from '../config/load.js';
import { isServiceProcess } from './exit-mode.js';
import type { Role } from './start.js';

// Each command loads its own modules when it runs (dynamic import), so `svc queue` or `svc config` start
// in well under a second instead of first loading the whole service (control plane, MTA, Postgres).
// The shebang runs the sources from the repository's root (its --import is a path from there); `npm run build`
// takes the --import out of dist/bin/svc.js's.

const usage = `usage: svc <command>
  start [--role all|control|mta|imap]   run the service (all roles by default; SVC_WORKERS processes)
  migrate                               apply pending database migrations and exit
  migrate --status                      list applied and pending migrations; applies nothing
  config                                print the effective configuration, secrets redacted
  openapi                               print the OpenAPI document of the HTTP API
  gen                                   write docs/openapi.json and docs/reference.md from the route table
  doctor <domain>                       check which DNS records of a claimed domain are published
  doctor --ips                          check the reverse DNS (PTR and back) of each SVC_SOURCE_ADDRESSES address
  doctor --platform                     check the DNS records platform mail (resets, invitations) needs
  queue <subcommand>                    the outbound queue: list, inspect, retry, delete, summary, hold,
                                        release, bounce, lost (svc queue help)
  tls-report [--day YYYY-MM-DD] [--json]  outbound TLS sessions of a UTC day per domain and policy, and
                                        the state of each daily TLS report (RFC 8460)
  dev [messages [<id>]]                 development mode: every role, a local DNS zone, outbound mail
                                        caught in the data dir (./data-dev), a ready API key (svc dev help)
  api <METHOD> <path> [json-body]       one signed API request with the key in SVC_API_KEY_ID and
                                        SVC_API_KEY_SECRET (or SVC_PLATFORM_ADMIN_KEY); prints the answer`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help') {
    console.log(usage);
    return command === undefined ? 2 : 0;
  }
  if (command === 'openapi') {
    const { openApiDocument } = await import('../control/openapi.js');
    console.log(JSON.stringify(openApiDocument(), null, 2));
    return 0;
  }
  if (command === 'gen') return (await import('./gen.js')).gen();
  // Both read the environment themselves: `dev` has its own defaults (data dir, host name), `api` needs
  // no configuration but the API's address.
  if (command === 'dev') return (await import('./dev.js')).dev(rest);
  if (command === 'api') return (await import('./api.js')).api(rest);
  const config = loadConfig();
  switch (command) {
    case 'config':
      console.log(describeConfig(config, process.env));
      return 0;
    case 'migrate': {
      let status: boolean;
      try {
        status = parseArgs({ args: rest, options: { status: { type: 'boolean', default: false } } }).values.status;
      } catch (err) {
        console.error(`svc migrate: ${(err as Error).message}\nusage: svc migrate [--status]`);
        return 2;
      }
      const [{ createLogger }, { openDb }, { migrate, migrationStatus, migrationLabel }] = await Promise.all([
        import('../config/context.js'),
        import('../storage/index.js'),
        import('../storage/pg/migrate.js'),
      ]);
      const log = createLogger(config.logLevel);
      const db = await openDb(config, log);
      try {
        if (status) {
          // One line per migration, then a total: `applied  0001_foundation  <when>`, `pending  0020_…`.
          const { applied, pending } = await migrationStatus(db);
          for (const m of applied) {
            const unknown = m.known ? '' : '  (no file: applied by a newer release)';
            console.log(`applied  ${migrationLabel(m)}  ${m.appliedAt.toISOString()}${unknown}`);
          }
          for (const m of pending) console.log(`pending  ${migrationLabel(m)}`);
          console.log(`${applied.length} applied, ${pending.length} pending`);
          return 0;
        }
        const applied = await migrate(db);
        console.log(applied.length ? `applied: ${applied.join(', ')}` : 'up to date');
      } finally {
        await db.close();
      }
      return 0;
    }
    case 'doctor':
      return (await import('./doctor.js')).doctor(rest, config);
    case 'queue':
      return (await import('./queue.js')).queue(rest, config);
    case 'tls-report':
      return (await import('./tls-report.js')).tlsReport(rest, config);
    case 'start': {
      const { values } = parseArgs({ args: rest, options: { role: { type: 'string', default: 'all' } } });
      const role = values.role as Role;
      if (!['all', 'control', 'mta', 'imap'].includes(role)) {
        console.error(`svc start: unknown role ${JSON.stringify(role)} (all, control, mta or imap)`);
        return 2;
      }
      return (await import('./cluster.js')).startCommand(config, role);
    }
    default:
      console.error(`svc: unknown command ${JSON.stringify(command)}\n${usage}`);
      return 2;
  }
}

/**
 * A command ends by letting the event loop run dry, with its code in process.exitCode, not by process.exit(), which
 * shuts V8's platform down without disposing of the isolate first: a background compile job waiting for the main
 * thread to collect garbage then waits for good while the main thread waits to join it (nodejs/node#54918; seen in
 * `svc queue` usage errors under test, docs/decisions.md #80). Only should something still hold the loop open a second
 * later (a handle a command forgot) does the unreferenced timer end it the old way, once stdout has drained (a piped
 * `svc openapi` is far larger than one pipe buffer). A process that ran the service ends the old way at once
 * (bin/exit-mode.ts): a natural end runs native addons' exit-time finalizers, where one MTA died with SIGSEGV.
 */
function exit(code: number): void {
  const end = () => process.stdout.write('', () => process.exit(code));
  if (isServiceProcess()) {
    end();
    return;
  }
  process.exitCode = code;
  setTimeout(end, 1_000).unref();
}

main(process.argv.slice(2)).then(exit, (err) => {
  if (err instanceof ConfigError) {
    for (const line of err.problems) console.error(line);
    exit(2);
    return;
  }
  console.error(`svc: ${err instanceof Error ? err.message : String(err)}`);
  exit(1);
});
