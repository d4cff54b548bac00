// Environment → validated, frozen Config. A bad value stops the start with one line naming the
// variable and the problem; every bad variable is listed, not just the first.
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { crossChecks, fields, formats, type Config, type Field, type SourceAddresses } from './schema.js';
import { formatDuration } from './durations.js';

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(problems.join('\n'));
    this.problems = problems;
    this.name = 'ConfigError';
  }
}

const ajv = new Ajv({ allErrors: true, coerceTypes: true });
addFormats.default(ajv, ['email']);
for (const [name, check] of Object.entries(formats)) ajv.addFormat(name, check);

const validate = ajv.compile({
  type: 'object',
  properties: Object.fromEntries(fields.map((fl) => [fl.env, fl.schema])),
});

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  // Empty strings count as unset, as systemd EnvironmentFile lines like `SVC_X=` mean.
  const raw: Record<string, string> = {};
  for (const fl of fields) {
    const v = env[fl.env];
    if (v !== undefined && v.trim() !== '') raw[fl.env] = v.trim();
  }
  const coerced: Record<string, unknown> = { ...raw };
  if (!validate(coerced)) {
    const bad = new Set((validate.errors ?? []).map((e) => e.instancePath.slice(1)));
    const problems = fields
      .filter((fl) => bad.has(fl.env))
      // A secret's value is never echoed: the line goes to stderr and the journal.
      .map((fl) => {
        const explain = (fl as Field).explain;
        const why = fl.secret || !explain ? null : explain(raw[fl.env] as string);
        return (
          `invalid configuration: ${fl.env} ${fl.expect}` +
          (fl.secret ? '' : ` (got ${JSON.stringify(raw[fl.env])})`) +
          (why ? `: ${why}` : '')
        );
      });
    throw new ConfigError(problems);
  }
  const out: Partial<Config> = {};
  for (const fl of fields) {
    const v = raw[fl.env];
    (out as Record<string, unknown>)[fl.key] = v === undefined ? fl.fallback(out) : fl.parse(v);
  }
  const problems = crossChecks.map((check) => check(out as Config)).filter((p): p is string => p !== null);
  if (problems.length) throw new ConfigError(problems);
  return Object.freeze(out as Config);
}

/**
 * The effective configuration for `svc config`, secrets redacted. A variable that is set is printed as the
 * operator wrote it (`90s` stays `90s`); one that is unset shows its default in a form the variable reads back.
 */
export function describeConfig(config: Readonly<Config>, env: NodeJS.ProcessEnv = {}): string {
  const show = (v: unknown): string => {
    if (v === null) return '(unset)';
    // host:port exactly as SVC_DNS_SERVERS takes it back, IPv6 in brackets.
    if (Array.isArray(v))
      return v
        .map((x) => (typeof x === 'object' ? `${x.host.includes(':') ? `[${x.host}]` : x.host}:${x.port}` : String(x)))
        .join(',');
    if (typeof v === 'object') return showSourceAddresses(v as SourceAddresses);
    return String(v);
  };
  return fields
    .map((fl) => {
      const v = config[fl.key];
      const written = env[fl.env]?.trim();
      // Durations are held in ms and shown as an operator writes them (5m, 1h), always with their unit: a bare
      // number in a duration variable means seconds.
      const ms = fl.key.endsWith('Ms');
      const shown =
        ms && typeof v === 'number'
          ? formatDuration(v)
          : ms && Array.isArray(v)
            ? (v as number[]).map((x) => formatDuration(x))
            : v;
      let value = fl.secret && v !== null ? '(set, redacted)' : written ? written : show(shown);
      if (fl.key === 'publicUrl' && v === null) value = `(unset: http://${config.bindHost}:<bound HTTP port>)`;
      return `${fl.env}=${value}\n    # ${fl.doc}`;
    })
    .join('\n');
}

/**
 * SVC_SOURCE_ADDRESSES back in its own syntax: the default address, then `domain=address` entries, each address
 * with its `@ehlo-name` when it has one.
 */
function showSourceAddresses(s: SourceAddresses): string {
  const withName = (a: string) => (s.ehlo[a] ? `${a}@${s.ehlo[a]}` : a);
  const items = [
    ...(s.default ? [withName(s.default)] : []),
    ...Object.entries(s.byDomain).map(([d, a]) => `${d}=${withName(a)}`),
  ];
  return items.length ? items.join(',') : '(unset)';
}
