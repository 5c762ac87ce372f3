import type { z } from 'zod';
import type { Environment, PatternSettings } from './environment';

/** A family of variables read by pattern (CS_<N>, JOBS_<QUEUE>_<SETTING>): its row in the reference. */
export interface PatternVariable {
  variable: string;
  default: string;
  description: string;
}

/**
 * One area of the configuration. Each variable is written once, in `variables`: its validation
 * and default (the zod schema) and its meaning (`.describe()`, or `.meta()` with `unset` when an
 * unset variable means more than "unset"). `settings` turns the validated variables into the
 * area's part of Config, whose type is inferred from it; docs/configuration.md is generated from
 * the variables and patterns (`plinth config docs`).
 */
export interface Area {
  /** The area's name in the reference, as its file is named. */
  name: string;
  title: string;
  variables: z.ZodRawShape;
  patterns?: readonly PatternVariable[];
  /** Problems between variables (each message names them), checked once every variable is valid. */
  problems?(values: Environment, env: Record<string, string>): string[];
  settings(values: Environment, found: PatternSettings, env: Record<string, string>): object;
}
