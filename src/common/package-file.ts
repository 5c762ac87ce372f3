import fs from 'node:fs';
import path from 'node:path';

/** A file of an installed package, looked up as Node looks up the package (its `exports` need not list the file). */
export function packageFile(name: string, file: string): string {
  for (const folder of require.resolve.paths(name) ?? []) {
    const candidate = path.join(folder, name, file);
    if (fs.existsSync(candidate)) return candidate;
  }
  throw new Error(`${name}/${file} is not installed (run npm ci)`);
}
