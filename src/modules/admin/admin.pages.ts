import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { packageFile } from '../../common/package-file';
import { sha256Hex } from '../../common/sha256';
import { acceptsGzip } from '../../http/accept-encoding';
import { sendError } from '../../http/errors';

/** The dashboard's own browser code and styles (plain ES modules: no build step), read from the source tree. */
const PAGES_DIR = path.resolve(__dirname, '..', '..', '..', '..', 'src', 'modules', 'admin', 'pages');

/** A page of the dashboard: its path (`:name` is a parameter, given to the page), its module in pages/ and the component it exports. */
interface AdminPage {
  path: string;
  title: string;
  module: string;
  component: string;
  /** false: out of the navigation (a page reached from another). */
  nav?: false;
}

/**
 * The dashboard's pages, in the navigation's order: the server serves the document at each path,
 * and the document gives the list to app.js (a JSON data block, which the Content-Security-Policy
 * allows: it is not run), so the routes and the navigation come from this one list.
 */
export const ADMIN_PAGES: readonly AdminPage[] = [
  { path: '/', title: 'Dashboard', module: 'dashboard.js', component: 'Dashboard' },
  { path: '/services', title: 'Services', module: 'services.js', component: 'Services' },
  { path: '/config', title: 'Configuration', module: 'config.js', component: 'Configuration' },
  { path: '/database', title: 'Database', module: 'database.js', component: 'Database' },
  { path: '/errors', title: 'Errors', module: 'errors.js', component: 'ErrorProjects' },
  { path: '/errors/:projectId', title: 'Errors', module: 'errors.js', component: 'ErrorProject', nav: false },
  { path: '/errors/:projectId/:errorId', title: 'Error', module: 'errors.js', component: 'ErrorDetails', nav: false },
  { path: '/events', title: 'Events', module: 'events.js', component: 'Events' },
  { path: '/jobs', title: 'Jobs', module: 'jobs.js', component: 'Jobs' },
  { path: '/newsletter', title: 'Newsletter', module: 'newsletter.js', component: 'Newsletter' },
  { path: '/plugins', title: 'Plugins', module: 'plugins.js', component: 'Plugins' },
  { path: '/plugins/:name', title: 'Plugin', module: 'plugins.js', component: 'Plugin', nav: false },
  { path: '/deployment/environments', title: 'Deployment', module: 'deployment.js', component: 'DeploymentEnvironments' },
  { path: '/deployment/staging', title: 'Staging', module: 'deployment.js', component: 'StagingDeployment', nav: false },
  { path: '/deployment/prod', title: 'Production', module: 'deployment.js', component: 'ProductionDeployment', nav: false },
  { path: '/certificates', title: 'Certificates', module: 'certificates.js', component: 'Certificates' },
  { path: '/data', title: 'Data', module: 'data.js', component: 'DataBrowser' },
  { path: '/data/:table', title: 'Data', module: 'data.js', component: 'DataBrowser', nav: false },
];

/**
 * The vendored files the pages load, by their name under /assets/<version>/ (beside every file of
 * PAGES_DIR). Preact's hooks import the bare name "preact", which a browser cannot resolve without
 * an import map (an inline script the Content-Security-Policy would refuse): it is rewritten to the sibling file.
 */
const VENDORED: Record<string, () => string> = {
  'preact.js': () => vendored('preact', 'dist/preact.mjs'),
  'hooks.js': () => vendored('preact', 'hooks/dist/hooks.mjs').replace(/from\s*"preact"/g, 'from"./preact.js"'),
  'htm.js': () => vendored('htm', 'dist/htm.module.js'),
};
const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css' };

/** Scripts, styles, requests and images from the dashboard's own origin only; no inline code, no frames, no forms posted elsewhere. */
export const PAGE_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** A year: an asset's URL holds the version of every asset, so a changed file is a new URL. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

interface Asset {
  type: string;
  body: Buffer;
  gzipped: Buffer;
}

function vendored(name: string, file: string): string {
  // A source map comment would make the developer tools ask for a file the dashboard does not serve.
  return fs.readFileSync(packageFile(name, file), 'utf8').replace(/\n?\/\/# sourceMappingURL=\S+\s*$/, '\n');
}

function loadAssets(): { version: string; files: Map<string, Asset> } {
  const files = new Map<string, Asset>();
  const add = (name: string, text: string) => {
    const body = Buffer.from(text);
    files.set(name, { type: `${TYPES[path.extname(name)]}; charset=utf-8`, body, gzipped: gzipSync(body, { level: 9 }) });
  };
  for (const [name, read] of Object.entries(VENDORED)) add(name, read());
  // One module per page (app.js routes between them) and the style sheet.
  for (const name of fs.readdirSync(PAGES_DIR).sort()) {
    if (TYPES[path.extname(name)]) add(name, fs.readFileSync(path.join(PAGES_DIR, name), 'utf8'));
  }
  const version = sha256Hex(Buffer.concat([...files.values()].map((asset) => asset.body))).slice(0, 16);
  return { version, files };
}

/** A module's static imports of its siblings (`from './x.js'`), as the browser will ask for them. */
const SIBLING_IMPORT = /\bfrom\s*["']\.\/([\w.-]+\.js)["']/g;

/** `entries` and every module they import, directly or not. */
function moduleClosure(files: Map<string, Asset>, entries: string[]): string[] {
  const found = new Set<string>();
  const visit = (name: string) => {
    const asset = files.get(name);
    if (found.has(name) || !asset) return;
    found.add(name);
    for (const match of asset.body.toString('utf8').matchAll(SIBLING_IMPORT)) visit(match[1]);
  };
  entries.forEach(visit);
  return [...found];
}

/** The JSON of the pages for a data block: `<` escaped so that no text can close the element. */
function pagesData(): string {
  return JSON.stringify(ADMIN_PAGES).replace(/</g, '\\u003c');
}

function pageDocument(version: string, scripts: string[]): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="color-scheme" content="light dark">',
    '<link rel="icon" href="data:,">',
    '<title>Plinth admin</title>',
    `<link rel="stylesheet" href="/assets/${version}/style.css">`,
    `<script type="application/json" id="plinth-pages">${pagesData()}</script>`,
    `<script type="module" src="/assets/${version}/app.js"></script>`,
    // The modules app.js and the page need, fetched beside app.js rather than after the one importing them has been read.
    ...scripts.filter((file) => file !== 'app.js').map((file) => `<link rel="modulepreload" href="/assets/${version}/${file}">`),
    '</head>',
    '<body>',
    '<div id="app"><noscript>The Plinth dashboard needs JavaScript.</noscript></div>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

function send(request: FastifyRequest, reply: FastifyReply, body: Buffer, gzipped: Buffer, type: string): FastifyReply {
  reply.header('vary', 'Accept-Encoding').type(type);
  if (!acceptsGzip(request.headers['accept-encoding'])) return reply.send(body);
  return reply.header('content-encoding', 'gzip').send(gzipped);
}

/**
 * The dashboard's pages, on the admin port only (the admin scope's hook refuses the main port):
 * one document for every page, and its assets from this server (nothing from another host).
 * They need no session: the script asks GET /api/auth/session and shows the login form on 401.
 */
export function adminPages(scope: FastifyInstance, options: { preload: boolean }): void {
  let loaded: { version: string; files: Map<string, Asset>; documents: Map<string, { body: Buffer; gzipped: Buffer }> } | undefined;
  // Read at start with the dashboard on (or on the first request): a server with the dashboard off never reads them.
  const assets = () => {
    if (!loaded) {
      const { version, files } = loadAssets();
      const documents = new Map<string, { body: Buffer; gzipped: Buffer }>();
      for (const page of ADMIN_PAGES) {
        const body = Buffer.from(pageDocument(version, moduleClosure(files, ['app.js', page.module])));
        documents.set(page.path, { body, gzipped: gzipSync(body) });
      }
      loaded = { version, files, documents };
    }
    return loaded;
  };
  // With the dashboard on, read and compressed while the server starts: the first page load does not wait for it.
  if (options.preload) scope.addHook('onReady', async () => void assets());
  for (const { path: route } of ADMIN_PAGES) {
    scope.get(route, { schema: { hide: true } }, (request, reply) => {
      const document = assets().documents.get(route)!;
      reply.header('content-security-policy', PAGE_SECURITY_POLICY).header('referrer-policy', 'no-referrer');
      return send(request, reply, document.body, document.gzipped, 'text/html; charset=utf-8');
    });
  }
  scope.get<{ Params: { version: string; file: string } }>('/assets/:version/:file', { schema: { hide: true } }, (request, reply) => {
    const { version, files } = assets();
    const asset = files.get(request.params.file);
    // An old version's URL is refused rather than answered with today's file under a year-long cache.
    if (!asset || request.params.version !== version) return sendError(reply, 404, 'NOT_FOUND', `No asset ${request.params.file} in this version`);
    reply.header('cache-control', IMMUTABLE);
    return send(request, reply, asset.body, asset.gzipped, asset.type);
  });
}
