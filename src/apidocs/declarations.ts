import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { CustomService } from '../config';
import { expected, readJson, readPlugins, shownPath, type PluginManifest } from '../platform/plugin-manifests';

export { shownPath, type PluginManifest };

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

/**
 * Reads `<plugins>/<folder>/plugin.json` for every plugin folder and `<services>/<name>/openapi.json`
 * for every custom service that has one (Plinth's own declaration, template `plinth`, is Plinth).
 * Each bad declaration is left out and reported by its file and entry; the server warns about
 * them, `plinth build` fails on them.
 */
export function readDeclarations(sources: DeclarationSources): { declarations: Declarations; problems: string[] } {
  const problems: string[] = [];
  const plugins = readPlugins(sources.pluginsDir, problems);

  const services: ServiceDocument[] = [];
  for (const service of sources.customServices) {
    if (service.template === 'plinth') continue;
    const file = path.join(sources.servicesDir, service.name, 'openapi.json');
    if (!fs.existsSync(file)) continue;
    const document = readJson(file, serviceDocument, problems, `${shownPath(file)} of ${service.variable} (${service.name})`);
    if (document) services.push({ service, file, document });
  }
  return { declarations: { plugins, services }, problems };
}
