import fs from 'node:fs';
import { parseEnv } from 'node:util';
import type { Logger } from 'pino';
import { Refusal } from '../../common/refusal';
import { AREAS, ConfigError, loadConfig, SECRET_NAME } from '../../config';
import { writeEnvSettings } from '../../config/env-file';
import { areaVariables } from '../../config/reference';

/** One setting as the admin API shows it; a secret's value is never shown, only whether it is set. */
export interface SettingView {
  name: string;
  area: string;
  description: string;
  /** The default as the reference writes it, or what unset means. */
  default: string;
  secret: boolean;
  /** The value this process runs with (null: unset); a secret's is "********", a URL's password masked. */
  value: string | null;
  /** The value in the settings file now (null: not there), masked the same way. */
  fileValue: string | null;
  /** Where the running value came from. */
  source: 'environment' | 'settings file' | 'default';
  /** The settings file holds another value than the running one: it applies at the next start. */
  pendingRestart: boolean;
}

/** What POST /api/config did. */
export interface SettingsChange {
  settingsFile: string;
  written: string[];
  /** Settings are read at start-up: every written value that differs from the running one. */
  restartRequired: string[];
  /** Written, but the process environment sets them, and the environment wins over the file. */
  overriddenByEnvironment: string[];
}

const MASK = '********';
const MAX_VALUE_LENGTH = 10_000;

/** The variables of the areas, and the families read by pattern (CS_<N>, JOBS_<QUEUE>_<SETTING>) as expressions. */
const VARIABLES = AREAS.flatMap((area) => areaVariables(area).map((entry) => ({ ...entry, area: area.name })));
const KNOWN = new Set(VARIABLES.map((entry) => entry.variable));
const PATTERNS = AREAS.flatMap((area) => area.patterns ?? []).map((pattern) => new RegExp(`^${pattern.variable.replace(/<[^>]+>/g, '[A-Z0-9_]+')}$`));

/** Whether `name` is a setting Plinth reads. */
export function isSettingName(name: string): boolean {
  return KNOWN.has(name) || PATTERNS.some((pattern) => pattern.test(name));
}

function masked(name: string, value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  if (SECRET_NAME.test(name)) return MASK;
  // DATABASE_URL and the like may carry a password.
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value) && URL.canParse(value)) {
    const url = new URL(value);
    if (url.password) {
      url.password = MASK;
      return url.toString();
    }
  }
  return value;
}

/**
 * The configuration as the admin API reads and changes it: the settings this process started with
 * (`running`, the known variables as loadConfig read them), and the settings file, which a change
 * is written to after the same validation as start-up.
 */
export class AdminSettings {
  private readonly running: Readonly<Record<string, string>>;

  constructor(
    environment: Readonly<Record<string, string>>,
    readonly settingsFile: string,
    private readonly logger: Logger,
  ) {
    this.running = Object.fromEntries(Object.entries(environment).filter(([name]) => isSettingName(name)));
  }

  list(): SettingView[] {
    const file = this.readFile();
    return VARIABLES.map(({ variable, area, default: defaultText, meaning }) => {
      const value = this.running[variable];
      return {
        name: variable,
        area,
        description: meaning,
        default: defaultText,
        secret: SECRET_NAME.test(variable),
        value: masked(variable, value),
        fileValue: masked(variable, file[variable]),
        source: value === undefined ? 'default' : file[variable] === value ? 'settings file' : 'environment',
        pendingRestart: variable in file && (file[variable] || undefined) !== value,
      };
    });
  }

  /**
   * Validates `changes` (a value, or null or "" to unset) together with the settings file and the
   * running settings, by loadConfig's rules, then writes them to the settings file. A refusal names
   * every bad variable and writes nothing.
   */
  update(changes: Record<string, string | null>): SettingsChange {
    const names = Object.keys(changes);
    const unknown = names.filter((name) => !isSettingName(name));
    if (unknown.length > 0) throw new Refusal('UNKNOWN_SETTING', `Not a setting of Plinth: ${unknown.join(', ')}`, 400, { field: unknown[0] });
    const tooLong = names.find((name) => (changes[name]?.length ?? 0) > MAX_VALUE_LENGTH);
    if (tooLong) throw new Refusal('INVALID_CONFIG', `${tooLong} is longer than ${MAX_VALUE_LENGTH} characters`, 400, { field: tooLong });
    const values = Object.fromEntries(names.map((name) => [name, changes[name] ?? '']));
    try {
      loadConfig({ ...this.running, ...this.readFile(), ...values });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      const named = error.problems.map((problem) => /^[A-Z][A-Z0-9_]*/.exec(problem)?.[0]).find((name) => name !== undefined);
      throw new Refusal('INVALID_CONFIG', `Invalid configuration: ${error.problems.join('; ')}`, 400, named ? { field: named } : {});
    }
    writeEnvSettings(values, this.settingsFile);
    // Names only: values may be secrets.
    this.logger.info({ settings: names, file: this.settingsFile }, 'admin changed settings');
    return {
      settingsFile: this.settingsFile,
      written: names,
      restartRequired: names.filter((name) => (values[name] || undefined) !== this.running[name]),
      overriddenByEnvironment: names.filter((name) => process.env[name] !== undefined && process.env[name] !== ''),
    };
  }

  private readFile(): Record<string, string> {
    try {
      return parseEnv(fs.readFileSync(this.settingsFile, 'utf8')) as Record<string, string>;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw error;
    }
  }
}
