import { z } from 'zod';
import type { Area } from './area';
import { AREAS } from './index';

/** docs/configuration.md: every area's variables with their defaults and meanings, from the areas themselves. */
export function configurationReference(areas: readonly Area[] = AREAS): string {
  const sections = areas.map((area) => {
    const rows = [
      ...areaVariables(area).map((entry) => row(entry.variable, entry.default, entry.meaning)),
      ...(area.patterns ?? []).map((pattern) => row(pattern.variable, pattern.default, pattern.description)),
    ];
    return [
      `## ${area.title}`,
      '',
      `Area \`${area.name}\` (\`src/config/${area.name}.ts\`).`,
      '',
      '| Variable | Default | Meaning |',
      '|---|---|---|',
      ...rows,
    ].join('\n');
  });
  return [
    '# Configuration reference',
    '',
    '<!-- Generated from src/config/ by `npm run config:docs`; CI fails when it is stale. Edit the areas, not this file. -->',
    '',
    'Every setting is an environment variable; a `.env` file in the project folder (`PLATFORM_PROJECT_PATH` in the environment,',
    'else the working folder) is read too (the environment wins), and an empty value counts as unset. A bad value stops',
    'start-up with a message naming the variable. The README explains the production requirements and the main settings;',
    'this is the whole list, by area.',
    '',
    ...areas.map((area) => `- [${area.title}](#${anchor(area.title)})`),
    '',
    sections.join('\n\n'),
    '',
  ].join('\n');
}

/** One variable as the reference (and the admin API) describes it. */
export interface VariableDescription {
  variable: string;
  /** The default as an operator writes it, or what an unset variable means. */
  default: string;
  meaning: string;
}

/** The variables of one area, described, in their order. */
export function areaVariables(area: Area): VariableDescription[] {
  return Object.entries(area.variables).map(([variable, schema]) => ({ variable, default: defaultText(schema), meaning: meaningOf(variable, schema) }));
}

function row(variable: string, defaultValue: string, meaning: string): string {
  return `| \`${variable}\` | ${cell(defaultValue)} | ${cell(meaning)} |`;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes. */
function anchor(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-');
}

function meaningOf(variable: string, schema: z.core.$ZodType): string {
  const meaning = z.globalRegistry.get(schema)?.description;
  if (!meaning) throw new Error(`${variable} has no description: give it one with .describe() in its area`);
  return meaning;
}

/** The default as an operator writes it (a list comma-separated), or what an unset variable means. */
function defaultText(schema: z.core.$ZodType): string {
  const value = defaultOf(schema);
  if (value === undefined) return String(z.globalRegistry.get(schema)?.unset ?? 'unset');
  if (Array.isArray(value)) return value.length === 0 ? 'none' : `\`${value.join(',')}\``;
  return `\`${String(value)}\``;
}

function defaultOf(schema: z.core.$ZodType): unknown {
  if (schema instanceof z.ZodDefault) return schema.def.defaultValue;
  if (schema instanceof z.ZodPipe) return defaultOf(schema.in);
  return undefined;
}
