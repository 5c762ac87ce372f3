import type { GraphQLSchema } from 'graphql';
import { SECURITY_SCHEMES } from '../platform/fastify/security-schemes';
import type { Declarations, PluginManifest, ServiceDocument } from './declarations';
import { shownPath } from './declarations';
import { GRAPHQL_SCHEMAS, graphqlOperationsMarkdown, graphqlPaths, type ActionRoute } from './graphql-reference';

/** Where the spec is served (spec 1 §4). */
export const OPENAPI_PATH = '/api-docs';

type Json = Record<string, unknown>;

/** Plinth's own tags, in the order the reference shows them: the name shown, and what each groups. */
const PLATFORM_TAGS: Record<string, { title: string; description?: string }> = {
  graphql: { title: 'GraphQL' },
  actions: { title: 'Actions', description: 'Engine-compatible action handlers: the engine POSTs the action envelope, Plinth answers with the result.' },
  metadata: {
    title: 'Metadata',
    description: "The metadata API, with Hasura's request shapes: actions, event triggers, cron triggers and scheduled events.",
  },
  auth: { title: 'Auth', description: 'The authentication service.' },
  events: { title: 'Events', description: 'Event triggers, scheduled events and inbound webhooks.' },
  errors: { title: 'Error tracking', description: 'Error tracking: ingestion and management.' },
  billing: { title: 'Billing', description: 'Payments and the payment provider.' },
  newsletter: { title: 'Newsletter', description: 'Newsletter subscriptions.' },
  admin: {
    title: 'Admin',
    description:
      "The admin dashboard's API, on its own port (PLATFORM_ADMIN_PORT, 127.0.0.1:3021 by default) when PLATFORM_ADMIN_ENABLED is true. " +
      'Log in for the session cookie, and send the answered CSRF token in X-CSRF-Token with every change.',
  },
  files: { title: 'Files', description: 'Downloads of uploaded files, their thumbnails and report results, by signed link or session.' },
  health: { title: 'Health', description: 'Liveness, readiness and metrics, for orchestrators and monitoring.' },
  docs: { title: 'API reference', description: 'This reference: the OpenAPI document and the page.' },
};

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

type AddPath = (route: string, item: Json, source: string) => void;

export interface OpenApiInput {
  /** Plinth's REST routes, as @fastify/swagger documents them from their route schemas. */
  routes: Json;
  schema: GraphQLSchema;
  actions: readonly ActionRoute[];
  declarations: Declarations;
  title: string;
  version: string;
  publicUrl: string;
  graphql: { enabled: boolean; endpoint: string };
  hiddenPrefixes: readonly string[];
  /** Routes served on a port of their own (the admin dashboard's). */
  listeners: readonly OwnListener[];
}

/**
 * Routes the main app routes under `prefix` but serves only on a listener of its own, at its root
 * (the admin dashboard's API on PLATFORM_ADMIN_PORT): documented there, without the prefix.
 */
export interface OwnListener {
  prefix: string;
  url: string;
  description: string;
}

/**
 * The whole API in one OpenAPI 3.1 document: the REST routes, the GraphQL endpoints and
 * operations, the custom services' endpoints (at their own servers) and the plugins' routes,
 * less the paths under API_DOCS_HIDE_ENDPOINTS. A path a service or plugin declares that is
 * already documented is left out and reported through `problems`. Keys come in a fixed order,
 * so equal inputs give equal text.
 */
export function openApiDocument(input: OpenApiInput, problems: string[] = []): Json {
  const paths: Record<string, Json> = {};
  // A path item of another server (a custom service) cannot share its path with anything.
  const add: AddPath = (route, item, source) => {
    const existing = paths[route];
    const taken =
      existing && ('servers' in item || 'servers' in existing)
        ? ['the path']
        : METHODS.filter((method) => method in item && existing?.[method]).map((method) => method.toUpperCase());
    if (taken.length) {
      problems.push(`${source}: ${taken.join(', ')} ${route} is already documented`);
      return;
    }
    paths[route] = { ...existing, ...item };
  };
  const tags: Record<string, string> = {};

  if (input.graphql.enabled) {
    for (const [route, item] of Object.entries(graphqlPaths(input.graphql.endpoint, input.schema))) add(route, item as Json, 'GraphQL');
    tags.graphql = graphqlOperationsMarkdown(input.schema, input.graphql.endpoint, input.actions);
  }
  for (const [route, item] of Object.entries((input.routes.paths ?? {}) as Record<string, Json>)) {
    const listener = input.listeners.find((candidate) => isUnder(route, candidate.prefix));
    if (listener) add(route.slice(listener.prefix.length) || '/', { servers: [{ url: listener.url, description: listener.description }], ...item }, 'Plinth');
    else add(route, item, 'Plinth');
  }

  const components: Record<string, Json> = {};
  const addComponents = (kind: string, entries: Json) => (components[kind] = { ...components[kind], ...entries });
  addComponents('securitySchemes', SECURITY_SCHEMES);
  if (input.graphql.enabled) addComponents('schemas', GRAPHQL_SCHEMAS);
  for (const [kind, entries] of Object.entries((input.routes.components ?? {}) as Record<string, Json>)) addComponents(kind, entries);
  // A service's or plugin's group is its own: a name that is already a tag would merge two groups.
  const claimTag = (name: string, description: string, source: string) => {
    if (name in PLATFORM_TAGS || name in tags) {
      problems.push(`${source}: the name ${name} is already a tag of the reference`);
      return false;
    }
    tags[name] = description;
    return true;
  };
  for (const service of input.declarations.services) {
    const { name, variable, template, port } = service.service;
    if (claimTag(name, `Custom service \`${name}\` (${variable}, template ${template}), at http://${name}:${port}.`, shownPath(service.file))) {
      mergeService(service, add, addComponents);
    }
  }
  for (const plugin of input.declarations.plugins) {
    if (!claimTag(plugin.name, plugin.description ?? `Routes of the ${plugin.name} plugin.`, shownPath(plugin.file))) continue;
    for (const [route, item] of Object.entries(pluginPaths(plugin))) add(route, item, shownPath(plugin.file));
  }

  const shown = Object.keys(paths)
    .filter((route) => !input.hiddenPrefixes.some((prefix) => isUnder(route, prefix)))
    .sort();
  const used = new Set(shown.flatMap((route) => operations(paths[route]).flatMap((operation) => (operation.tags as string[] | undefined) ?? [])));
  const tagOrder = [...Object.keys(PLATFORM_TAGS), ...Object.keys(tags), ...[...used].sort()];
  return {
    openapi: '3.1.0',
    info: {
      title: input.title,
      version: input.version,
      description: `Every REST route, the GraphQL API and the endpoints of custom services and plugins, generated from the server's own route and GraphQL schemas.`,
    },
    servers: [{ url: input.publicUrl, description: 'PLINTH_PUBLIC_URL' }],
    tags: [...new Set(tagOrder)]
      .filter((tag) => used.has(tag))
      .map((name) => {
        const description = tags[name] ?? PLATFORM_TAGS[name]?.description;
        // x-displayName: the name Scalar (and Redoc) show for a tag.
        return { name, ...(PLATFORM_TAGS[name] ? { 'x-displayName': PLATFORM_TAGS[name].title } : {}), ...(description ? { description } : {}) };
      }),
    paths: Object.fromEntries(shown.map((route) => [route, paths[route]])),
    components: Object.fromEntries(Object.entries(components).filter(([, entries]) => Object.keys(entries).length > 0)),
  };
}

/** A path is hidden by a prefix it equals or lies under (`/admin` hides `/admin/users`, not `/administrator`). */
function isUnder(route: string, prefix: string): boolean {
  return prefix === '/' || route === prefix || route.startsWith(`${prefix}/`);
}

function operations(item: Json): Json[] {
  return METHODS.filter((method) => method in item).map((method) => item[method] as Json);
}

/** A plugin's routes (spec 1 §2.8), tagged with its name; what they take and answer is the plugin's. */
function pluginPaths(plugin: PluginManifest): Record<string, Json> {
  const paths: Record<string, Json> = {};
  for (const route of plugin.rest_routes) {
    const parameters = [...route.path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
    paths[route.path] = {
      ...paths[route.path],
      [route.method.toLowerCase()]: {
        tags: [plugin.name],
        summary: route.summary,
        ...(parameters.length ? { parameters } : {}),
        responses: { default: { description: `Answered by the ${plugin.name} plugin` } },
      },
    };
  }
  return paths;
}

/**
 * A custom service's paths at its own server (http://<name>:<port>), tagged with its name. Its
 * components are renamed `<name>.<component>` (and every reference to them), so that services
 * cannot collide with each other or with Plinth.
 */
function mergeService(entry: ServiceDocument, add: AddPath, addComponents: (kind: string, entries: Json) => void): void {
  const { service, document } = entry;
  const prefix = `${service.name}.`;
  const rename = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rename);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, child]) =>
        key === '$ref' && typeof child === 'string' ? [key, child.replace(/^#\/components\/([^/]+)\//, `#/components/$1/${prefix}`)] : [key, rename(child)],
      ),
    );
  };
  const renameSecurity = (requirements: unknown) =>
    (requirements as Record<string, string[]>[]).map((requirement) =>
      Object.fromEntries(Object.entries(requirement).map(([scheme, scopes]) => [`${prefix}${scheme}`, scopes])),
    );

  for (const [kind, entries] of Object.entries(document.components ?? {})) {
    addComponents(kind, Object.fromEntries(Object.entries(entries).map(([name, value]) => [`${prefix}${name}`, rename(value)])));
  }
  for (const [route, rawItem] of Object.entries(document.paths)) {
    const item = rename(rawItem) as Json;
    for (const method of METHODS.filter((name) => name in item)) {
      const operation = item[method] as Json;
      const security = operation.security ?? document.security;
      item[method] = { ...operation, tags: [service.name], ...(security ? { security: renameSecurity(security) } : {}) };
    }
    add(
      route,
      { servers: [{ url: `http://${service.name}:${service.port}`, description: `${service.variable} (${service.name})` }], ...item },
      shownPath(entry.file),
    );
  }
}
