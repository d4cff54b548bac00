// The /etc/svc-mail/env of docs/operations.md ("Install on a Debian host") names every variable of
// config/schema.ts exactly once, what it sets loads, and each commented line shows the default that
// `svc config` prints for those settings (with the unit's own Environment=), so uncommenting one changes nothing.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fields } from '../../config/schema.js';
import { describeConfig, loadConfig } from '../../config/load.js';
import { ROOT } from '../helpers/child.js';

const MARKER = '<!-- env-file:';

async function envFileBlock(): Promise<string[]> {
  const doc = await readFile(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
  const at = doc.indexOf(MARKER);
  if (at < 0) throw new Error(`docs/operations.md has no ${MARKER} marker`);
  const m = /```sh\n([\s\S]*?)\n\s*```/.exec(doc.slice(at));
  if (!m) throw new Error('no ```sh block after the marker');
  return m[1]!.split('\n').map((l) => l.trim());
}

/** `SVC_X=value` lines of `svc config` as a map. */
const described = (text: string) =>
  new Map(
    text
      .split('\n')
      .flatMap((l) => (/^(SVC_[A-Z0-9_]+)=(.*)$/.exec(l) ? [l.split(/=(.*)/s).slice(0, 2) as [string, string]] : [])),
  );

t.test('the env file of docs/operations.md', async (t) => {
  const lines = await envFileBlock();
  const entries = lines.flatMap((l) => {
    const m = /^(#?)(SVC_[A-Z0-9_]+)=(.*)$/.exec(l);
    return m ? [{ commented: m[1] === '#', name: m[2]!, value: m[3]! }] : [];
  });
  const names = entries.map((e) => e.name);
  const schema = fields.map((f) => f.env);
  t.same([...names].sort(), [...schema].sort(), 'every variable of config/schema.ts, and no other');
  t.same(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
    'each once',
  );
  for (const l of lines)
    if (l && !l.startsWith('#'))
      t.match(l, /^SVC_[A-Z0-9_]+=\S*$/, `an EnvironmentFile line, nothing after the value: ${l}`);

  // As systemd starts the service: the unit's Environment= lines, then the file's.
  const unit = await readFile(path.join(ROOT, 'config', 'svc.service'), 'utf8');
  const unitEnv = Object.fromEntries(
    [...unit.matchAll(/^Environment=(SVC_[A-Z0-9_]+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]),
  );
  t.same(unitEnv, { SVC_DATA_DIR: '/var/lib/svc-mail' }, 'the unit sets SVC_DATA_DIR');
  const set = { ...unitEnv, ...Object.fromEntries(entries.filter((e) => !e.commented).map((e) => [e.name, e.value])) };
  const config = loadConfig(set);
  const shown = described(describeConfig(config, set));
  for (const e of entries.filter((e) => e.commented)) {
    const value = shown.get(e.name);
    t.equal(value === '(unset)' ? '' : value, e.value, `#${e.name}= shows the default svc config prints`);
  }

  const all = { ...unitEnv, ...Object.fromEntries(entries.map((e) => [e.name, e.value])) };
  t.same(described(describeConfig(loadConfig(all), all)), shown, 'uncommenting every line changes nothing');
});
