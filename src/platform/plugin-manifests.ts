import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/** A zod error message that says "is required" when the value is missing and `message` otherwise. */
export const expected = (message: string) => ({ error: (issue: { input: unknown }) => (issue.input === undefined ? 'is required' : message) });

/** The methods a plugin route may declare (OpenAPI's, less TRACE). */
const METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH'] as const;

/** A plugin's name: also the name of its folder when the admin API installs it, and its routes' tag. */
export const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/;

/** An event name a plugin receives (`webhooks`): `order.created`, `user_signed_up`. */
const EVENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * plugin.json (spec 1 §2.8): a name, which becomes the routes' tag, and the REST routes the
 * plugin serves; optionally its version, a description, a `sync` endpoint (an http(s) URL the
 * admin API's sync POSTs to) and the `webhooks` (event names) it receives.
 */
export const pluginManifest = z.object({
  name: z.string(expected('must be a string')).trim().regex(PLUGIN_NAME, { error: 'must be 1 to 64 letters, digits, spaces, dots, dashes or underscores' }),
  version: z.string(expected('must be a string')).trim().min(1, { error: 'must not be empty' }).max(64).optional(),
  description: z.string(expected('must be a string')).optional(),
  rest_routes: z.array(
    z.object({
      method: z
        .string(expected('must be a string'))
        .transform((method) => method.toUpperCase())
        .pipe(z.enum(METHODS, { error: `must be one of ${METHODS.join(', ')}` })),
      // Fastify's `:id` becomes OpenAPI's `{id}`.
      path: z
        .string(expected('must be a string'))
        .regex(/^\/[A-Za-z0-9._~\-/{}:]*$/, { error: 'must be a path starting with /, such as /reports/{id}' })
        .transform((route) => route.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}')),
      summary: z.string(expected('must be a string')).trim().min(1, { error: 'must not be empty' }),
    }),
    expected('must be a list of {method, path, summary}'),
  ),
  sync: z.url({ protocol: /^https?$/, error: 'must be an http or https URL, such as http://127.0.0.1:4000/sync' }).optional(),
  webhooks: z
    .array(z.string().regex(EVENT_NAME, { error: 'must be an event name such as order.created' }), expected('must be a list of event names'))
    .optional(),
});

export type PluginManifest = z.infer<typeof pluginManifest> & { file: string };

/** The file a declaration came from, as a reader of the message knows it. */
export function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') ? relative : file;
}

/** One plugin folder: its manifest, or what is wrong with it. */
export interface PluginFolder {
  folder: string;
  file: string;
  manifest: PluginManifest | undefined;
  problems: string[];
}

/**
 * Reads and checks `<folder>/plugin.json`: a missing file, bad JSON, a field that is not as
 * plugin.json says, or a route declared twice is a problem named by its file (as `where`).
 */
export function readPluginManifest(file: string, where = shownPath(file)): { manifest: PluginManifest | undefined; problems: string[] } {
  const problems: string[] = [];
  const manifest = readJson(file, pluginManifest, problems, where);
  if (!manifest) return { manifest: undefined, problems };
  const keys = manifest.rest_routes.map(({ method, path: route }) => `${method} ${route}`);
  const repeated = keys.find((key, index) => keys.indexOf(key) !== index);
  if (repeated) return { manifest: undefined, problems: [`${where}: rest_routes declares ${repeated} twice`] };
  return { manifest: { ...manifest, file }, problems };
}

/**
 * Every plugin folder of `dir` (PLINTH_PLUGINS_DIR), sorted by name, each with its manifest or
 * its problems; a second folder declaring a name already taken is a problem of its own.
 */
export function readPluginFolders(dir: string, problems: string[]): PluginFolder[] {
  const folders: PluginFolder[] = [];
  for (const folder of pluginFolderNames(dir, problems)) {
    const file = path.join(dir, folder, 'plugin.json');
    const read = readPluginManifest(file);
    const clash = read.manifest && folders.find((other) => other.manifest?.name === read.manifest!.name);
    if (read.manifest && clash) {
      read.problems.push(`${shownPath(file)}: name "${read.manifest.name}" is already the name of ${shownPath(clash.file)}`);
      read.manifest = undefined;
    }
    problems.push(...read.problems);
    folders.push({ folder, file, ...read });
  }
  return folders;
}

/** The valid plugins of `dir`; each bad manifest is left out and reported in `problems`. */
export function readPlugins(dir: string, problems: string[]): PluginManifest[] {
  return readPluginFolders(dir, problems).flatMap((folder) => (folder.manifest ? [folder.manifest] : []));
}

/**
 * What the plugins of `dir` are now, cheaply (each folder's name and its manifest's size and
 * time): the API reference regenerates when it changes.
 */
export function pluginsFingerprint(dir: string): string {
  const parts: string[] = [];
  for (const folder of pluginFolderNames(dir, [])) {
    const stat = fs.statSync(path.join(dir, folder, 'plugin.json'), { throwIfNoEntry: false });
    parts.push(`${folder}:${stat ? `${stat.size}:${stat.mtimeMs}` : '-'}`);
  }
  return parts.join('|');
}

function pluginFolderNames(dir: string, problems: string[]): string[] {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // No plugins folder: no plugins.
    if (code !== 'ENOENT') problems.push(`${shownPath(dir)} (PLINTH_PLUGINS_DIR) cannot be read: ${code}`);
    return [];
  }
  return (
    entries
      // A hidden folder is no plugin (the admin API stages an install in one).
      .filter((entry) => !entry.name.startsWith('.'))
      .filter((entry) => entry.isDirectory() || (entry.isSymbolicLink() && fs.statSync(path.join(dir, entry.name), { throwIfNoEntry: false })?.isDirectory()))
      .map((entry) => entry.name)
      // readdir's order is the file system's; the spec must not depend on it.
      .sort()
  );
}

/** Reads a JSON file and checks it against `schema`; each problem is named by `where`. */
export function readJson<T>(file: string, schema: z.ZodType<T>, problems: string[], where = shownPath(file)): T | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    problems.push(code === 'ENOENT' ? `${where} is missing` : `${where} is not valid JSON: ${code ?? (error as Error).message}`);
    return undefined;
  }
  const result = schema.safeParse(parsed);
  if (result.success) return result.data;
  for (const issue of result.error.issues) {
    problems.push(`${where}: ${issue.path.length ? `${issue.path.join('.')} ` : ''}${issue.message}`);
  }
  return undefined;
}
