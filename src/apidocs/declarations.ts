import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { CustomService } from '../config';

/** A zod error message that says "is required" when the value is missing and `message` otherwise. */
const expected = (message: string) => ({ error: (issue: { input: unknown }) => (issue.input === undefined ? 'is required' : message) });

/** The methods a plugin route may declare (OpenAPI's, less TRACE). */
const METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH'] as const;

/** plugin.json (spec 1 §2.8): a name, which becomes the routes' tag, and the REST routes the plugin serves. */
const pluginManifest = z.object({
  name: z
    .string(expected('must be a string'))
    .trim()
    .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/, { error: 'must be 1 to 64 letters, digits, spaces, dots, dashes or underscores' }),
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
});

export type PluginManifest = z.infer<typeof pluginManifest> & { file: string };

/** A custom service's own OpenAPI document: enough of its shape to merge it; `plinth build` validates all of it. */
const serviceDocument = z.looseObject({
  openapi: z.string(expected('must be a string')).regex(/^3\.[01]\.\d+$/, { error: 'must be an OpenAPI 3.0 or 3.1 version such as 3.1.0' }),
  paths: z.record(
    z.string().regex(/^\//, { error: 'must start with /' }),
    z.record(z.string(), z.unknown(), { error: 'must be a path item object' }),
    expected('must be an object of path items'),
  ),
  components: z.record(z.string(), z.record(z.string(), z.unknown()), { error: 'must be an object of component maps' }).optional(),
  security: z.array(z.record(z.string(), z.array(z.string())), { error: 'must be a list of security requirements' }).optional(),
});

export interface ServiceDocument {
  service: CustomService;
  file: string;
  document: z.infer<typeof serviceDocument>;
}

/** What the spec documents besides Plinth's own routes (spec 1 §2.7): plugins' routes and custom services' endpoints. */
export interface Declarations {
  plugins: PluginManifest[];
  services: ServiceDocument[];
}

export interface DeclarationSources {
  pluginsDir: string;
  servicesDir: string;
  customServices: readonly CustomService[];
}

/** The file a declaration came from, as a reader of the message knows it. */
export function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') ? relative : file;
}

/**
 * Reads `<plugins>/<folder>/plugin.json` for every plugin folder and `<services>/<name>/openapi.json`
 * for every custom service that has one (Plinth's own declaration, template `plinth`, is Plinth).
 * Each bad declaration is left out and reported by its file and entry; the server warns about
 * them, `plinth build` fails on them.
 */
export function readDeclarations(sources: DeclarationSources): { declarations: Declarations; problems: string[] } {
  const problems: string[] = [];
  const plugins: PluginManifest[] = [];
  for (const folder of pluginFolders(sources.pluginsDir, problems)) {
    const file = path.join(sources.pluginsDir, folder, 'plugin.json');
    const manifest = readJson(file, pluginManifest, problems);
    if (!manifest) continue;
    const clash = plugins.find((plugin) => plugin.name === manifest.name);
    if (clash) {
      problems.push(`${shownPath(file)}: name "${manifest.name}" is already the name of ${shownPath(clash.file)}`);
      continue;
    }
    const keys = manifest.rest_routes.map(({ method, path: route }) => `${method} ${route}`);
    const repeated = keys.find((key, index) => keys.indexOf(key) !== index);
    if (repeated) {
      problems.push(`${shownPath(file)}: rest_routes declares ${repeated} twice`);
      continue;
    }
    plugins.push({ ...manifest, file });
  }

  const services: ServiceDocument[] = [];
  for (const service of sources.customServices) {
    if (service.template === 'plinth') continue;
    const file = path.join(sources.servicesDir, service.name, 'openapi.json');
    if (!fs.existsSync(file)) continue;
    const document = readJson(file, serviceDocument, problems, `${service.variable} (${service.name})`);
    if (document) services.push({ service, file, document });
  }
  return { declarations: { plugins, services }, problems };
}

function pluginFolders(dir: string, problems: string[]): string[] {
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
      .filter((entry) => entry.isDirectory() || (entry.isSymbolicLink() && fs.statSync(path.join(dir, entry.name), { throwIfNoEntry: false })?.isDirectory()))
      .map((entry) => entry.name)
      // readdir's order is the file system's; the spec must not depend on it.
      .sort()
  );
}

function readJson<T>(file: string, schema: z.ZodType<T>, problems: string[], owner?: string): T | undefined {
  const where = owner ? `${shownPath(file)} of ${owner}` : shownPath(file);
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
