import fs from 'node:fs';
import path from 'node:path';
import type { TemplateValues } from './template-values';

/** Template files end in `.tmpl`, so that neither the project's compiler nor its linter or formatter takes them for its own. */
const SUFFIX = '.tmpl';
/** A path segment that makes one file per action, named by the action's path segment. */
const PER_ACTION = '[action]';
const PLACEHOLDER = /\{\{(\w+)\}\}/g;

/** One action's part of a template: the name its files take, and their values besides the template's. */
export interface ActionFiles {
  path: string;
  values: TemplateValues;
}

/**
 * `text` with each `{{name}}` replaced by its value, in one pass (a value is written as it is,
 * never searched for placeholders); a placeholder without a value is an error naming `file`.
 */
export function fill(text: string, values: TemplateValues, file: string): string {
  return text.replace(PLACEHOLDER, (_match, name: string) => {
    if (!Object.hasOwn(values, name)) throw new Error(`${file}: the placeholder {{${name}}} has no value`);
    return values[name];
  });
}

/** The template files under `folder`, by path relative to it (`/`-separated). */
function templateFiles(folder: string): string[] {
  return fs
    .readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith(SUFFIX) && fs.statSync(path.join(folder, file)).isFile())
    .map((file) => file.split(path.sep).join('/'))
    .sort();
}

/**
 * The files of a project made of `folders`, by path: each `<path>.tmpl` gives `<path>`, filled in
 * from `values`; a path with an `[action]` segment gives one file per action, filled in from
 * `values` and the action's own. Two folders giving the same file is an error.
 */
export function renderFolders(folders: readonly string[], values: TemplateValues, actions: readonly ActionFiles[]): Record<string, string> {
  const files: Record<string, string> = {};
  for (const folder of folders) {
    for (const file of templateFiles(folder)) {
      const source = path.join(folder, file);
      const text = fs.readFileSync(source, 'utf8');
      const target = file.slice(0, -SUFFIX.length);
      const copies = target.includes(PER_ACTION)
        ? actions.map((action) => ({ target: target.replace(PER_ACTION, action.path), values: { ...values, ...action.values } }))
        : [{ target, values }];
      for (const copy of copies) {
        if (Object.hasOwn(files, copy.target)) throw new Error(`${source}: ${copy.target} is given by another folder too`);
        files[copy.target] = fill(text, copy.values, source);
      }
    }
  }
  return files;
}
