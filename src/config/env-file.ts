import fs from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';

/**
 * The settings file: `.env` in the project folder (PLATFORM_PROJECT_PATH in the environment, else
 * the working folder), which the admin API and `plinth admin` write too.
 */
export function settingsFileOf(env: NodeJS.ProcessEnv): string {
  return path.join(path.resolve(env.PLATFORM_PROJECT_PATH || '.'), '.env');
}

/**
 * Reads the settings file (settingsFileOf) when there is one. Variables already in the environment
 * win, so a deployment can override the file.
 */
export function environmentWithEnvFile(env: NodeJS.ProcessEnv, file = settingsFileOf(env)): NodeJS.ProcessEnv {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return env;
    throw error;
  }
  return { ...parseEnv(text), ...env };
}

/**
 * Sets `values` in the settings file (`.env`): a variable already there is replaced on its own
 * line, the others are appended; every other line (comments included) is kept as it was. Values
 * that need quoting are written as double-quoted strings, which `parseEnv` reads back.
 */
export function writeEnvSettings(values: Record<string, string>, file = '.env'): void {
  let lines: string[] = [];
  try {
    lines = fs.readFileSync(file, 'utf8').split('\n');
    if (lines.at(-1) === '') lines.pop();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const line = (name: string, value: string) => `${name}=${/^[\w.@:/+-]*$/.test(value) ? value : JSON.stringify(value)}`;
  const pending = new Map(Object.entries(values));
  const updated = lines.flatMap((existing) => {
    const name = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(existing)?.[1];
    if (name === undefined || !(name in values)) return [existing];
    // The first line of a variable takes the new value; a repeated one would override it.
    if (!pending.has(name)) return [];
    pending.delete(name);
    return [line(name, values[name])];
  });
  for (const [name, value] of pending) updated.push(line(name, value));
  // Owner-only: the file may hold the SMTP password.
  fs.writeFileSync(file, `${updated.join('\n')}\n`, { mode: 0o600 });
  fs.chmodSync(file, 0o600);
}
