// No line over 120 characters in source files, except table rows (`| a | b |`, in comments too) and
// lines carrying a URL: prettier wraps code but not comments or long strings, so this catches those.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const MAX = 120;
const files = execFileSync('git', ['ls-files', '*.ts', '*.js', '*.mjs', '*.json'], { encoding: 'utf8' })
  .split('\n')
  // docs/openapi.json is generated (npm run gen) and holds the routes' summaries as single strings.
  .filter((f) => f && !f.endsWith('package-lock.json') && !f.startsWith('bench/results/') && f !== 'docs/openapi.json');
const long = [];
for (const file of files) {
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (line.length <= MAX || /https?:\/\//.test(line) || /^\s*(\/\/|\*)?\s*\|/.test(line)) return;
      long.push(`${file}:${i + 1}: ${line.length} characters`);
    });
}
if (long.length) {
  console.error(`${long.length} line(s) over ${MAX} characters:\n${long.join('\n')}`);
  process.exit(1);
}
