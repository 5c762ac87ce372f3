import fs from 'node:fs';
import { parseEnv } from 'node:util';

/**
 * Reads `.env` from the working folder when there is one. Variables already in the environment
 * win, so a deployment can override the file.
 */
export function environmentWithEnvFile(env: NodeJS.ProcessEnv, file = '.env'): NodeJS.ProcessEnv {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return env;
    throw error;
  }
  return { ...parseEnv(text), ...env };
}
