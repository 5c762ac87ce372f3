import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from '../src/config';

/**
 * The configuration's output pinned: the Config of representative environments (the defaults,
 * production, every variable set) and the problems of an invalid value of each variable and of
 * each rule between variables: any change to them must be deliberate.
 */
const FIXTURES = path.join(__dirname, '..', '..', 'test', 'fixtures', 'config');

/** JSON keeping undefined members (as a marker) and independent of the working folder. */
function serialised(value: unknown): unknown {
  const text = JSON.stringify(value, (_key, member: unknown) => (member === undefined ? '__undefined__' : member));
  return JSON.parse(text.split(process.cwd()).join('<cwd>'));
}

function problemsOf(env: Record<string, string>): string[] | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

const environments = fs.readdirSync(FIXTURES).filter((file) => file !== 'refusals.json');

describe('the configuration of representative environments', () => {
  it.each(environments)('%s', (file) => {
    const { env, config } = JSON.parse(fs.readFileSync(path.join(FIXTURES, file), 'utf8'));
    expect(serialised(loadConfig(env))).toEqual(config);
  });
});

describe('the problems of invalid settings', () => {
  const refusals: { env: Record<string, string>; problems: string[] }[] = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'refusals.json'), 'utf8'));
  it.each(refusals.map((refusal) => [Object.keys(refusal.env).join(' '), refusal] as const))('%s', (_name, { env, problems }) => {
    // Several problems come area by area, so their order is not pinned.
    const found = problemsOf(env);
    expect(problems.length > 1 ? found?.sort() : found).toEqual(problems.length > 1 ? [...problems].sort() : problems);
  });
});
