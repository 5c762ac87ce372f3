import fs from 'node:fs';

/**
 * Writes a generated file's text to standard output or to `output`, or with `check` exits 1
 * when the committed file differs (CI's freshness checks): `source` is what it is generated from,
 * `command` what regenerates it.
 */
export function emitGenerated(text: string, options: { output?: string; check?: string }, source: string, command: string): void {
  if (options.check) {
    const committed = fs.existsSync(options.check) ? fs.readFileSync(options.check, 'utf8') : '';
    if (committed !== text) {
      process.stderr.write(`${options.check} is stale: run "${command}" and commit the result\n`);
      process.exit(1);
    }
    process.stdout.write(`${options.check} matches ${source}\n`);
  } else if (options.output) {
    fs.writeFileSync(options.output, text);
  } else {
    process.stdout.write(text);
  }
}
