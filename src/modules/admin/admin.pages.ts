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

/** The paths of the pages (PAGES in pages/app.js; `:name` is a parameter): each serves the same document, whose script shows the page (or the login form without a session). */
export const PAGE_PATHS = [
  '/',
  '/services',
  '/config',
  '/database',
  '/errors',
  '/errors/:projectId',
  '/errors/:projectId/:errorId',
  '/events',
  '/jobs',
  '/newsletter',
  '/plugins',
  '/plugins/:name',
  '/deployment/environments',
  '/deployment/staging',
  '/deployment/prod',
  '/certificates',
  '/data',
  '/data/:table',
] as const;

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
    `<script type="module" src="/assets/${version}/app.js"></script>`,
    // Every module fetched beside app.js rather than after the one importing it has been read: no waterfall of round trips.
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
  let loaded: { version: string; files: Map<string, Asset>; page: Buffer; pageGzipped: Buffer } | undefined;
  // Read at start with the dashboard on (or on the first request): a server with the dashboard off never reads them.
  const assets = () => {
    if (!loaded) {
      const { version, files } = loadAssets();
      const page = Buffer.from(
        pageDocument(
          version,
          [...files.keys()].filter((name) => name.endsWith('.js')),
        ),
      );
      loaded = { version, files, page, pageGzipped: gzipSync(page) };
    }
    return loaded;
  };
  // With the dashboard on, read and compressed while the server starts: the first page load does not wait for it.
  if (options.preload) scope.addHook('onReady', async () => void assets());
  for (const route of PAGE_PATHS) {
    scope.get(route, { schema: { hide: true } }, (request, reply) => {
      const { page, pageGzipped } = assets();
      reply.header('content-security-policy', PAGE_SECURITY_POLICY).header('referrer-policy', 'no-referrer');
      return send(request, reply, page, pageGzipped, 'text/html; charset=utf-8');
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
