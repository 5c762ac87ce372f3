import fs from 'node:fs';
import { packageFile } from '../common/package-file';
import type { ApiDocsTheme } from '../config';

/** Files of the npm packages the pages are made of, inlined so that a page is one file and loads nothing else. */
const VENDORED = {
  scalar: ['@scalar/api-reference', 'dist/browser/standalone.js'],
  react: ['react', 'umd/react.production.min.js'],
  reactDom: ['react-dom', 'umd/react-dom.production.min.js'],
  graphqlWs: ['graphql-ws', 'umd/graphql-ws.min.js'],
  graphiql: ['graphiql', 'graphiql.min.js'],
  graphiqlCss: ['graphiql', 'graphiql.min.css'],
} as const;

/**
 * A vendored file's text. Not kept: each server builds each page once, on its first request, and
 * several megabytes of source would otherwise stay in memory for good.
 */
function vendored(name: keyof typeof VENDORED): string {
  const [packageName, file] = VENDORED[name];
  // A source map comment would make the browser's developer tools ask our server for a file it does not have.
  return fs.readFileSync(packageFile(packageName, file), 'utf8').replace(/\n\/[/*]# sourceMappingURL=\S+\s*(\*\/)?\s*$/, '\n');
}

/**
 * Scalar's colours per API_DOCS_THEME (spec 1 §2.7): `default` follows the system's light or
 * dark mode (Scalar's default theme without a forced mode); moon and purple are dark; solarized
 * is light.
 */
const THEMES: Record<ApiDocsTheme, { theme: string; forceDarkModeState?: 'dark' | 'light' }> = {
  default: { theme: 'default' },
  moon: { theme: 'moon', forceDarkModeState: 'dark' },
  purple: { theme: 'purple', forceDarkModeState: 'dark' },
  solarized: { theme: 'solarized', forceDarkModeState: 'light' },
};

/** Text safe inside <script>: the HTML parser would end the element at `</script` and enter an escaped state at `<!--`. */
function scriptText(text: string): string {
  return text.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
}

/** JSON for a `<script type="application/json">` element, read back with JSON.parse. */
function jsonScript(id: string, value: unknown): string {
  return `<script id="${id}" type="application/json">${JSON.stringify(value).replace(/</g, '\\u003c')}</script>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

function page(title: string, head: string, body: string): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    // No favicon request: the page asks for nothing but itself.
    '<link rel="icon" href="data:,">',
    `<title>${escapeHtml(title)}</title>`,
    head,
    '</head>',
    '<body>',
    body,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

export interface ReferencePageSettings {
  title: string;
  theme: ApiDocsTheme;
  /** Pre-filled as the bearer token of the try-out panel. */
  bearerToken: string | undefined;
}

/**
 * The API reference page: Scalar's standalone bundle and the OpenAPI document in one HTML file.
 * Everything Scalar would fetch from elsewhere is off: fonts (withDefaultFonts), telemetry, the AI
 * agent, MCP, the proxy; the try-out panel sends requests to the page's own origin (`servers`).
 */
export function referencePage(document: unknown, settings: ReferencePageSettings): string {
  const configuration = {
    ...THEMES[settings.theme],
    hideDarkModeToggle: settings.theme !== 'default',
    withDefaultFonts: false,
    telemetry: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    showDeveloperTools: 'never',
    documentDownloadType: 'json',
    defaultOpenFirstTag: true,
    // Fields in the order the schemas declare them (success, then the result, then errors), not alphabetical.
    orderSchemaPropertiesBy: 'preserve',
    ...(settings.bearerToken
      ? { authentication: { preferredSecurityScheme: 'bearerAuth', securitySchemes: { bearerAuth: { token: settings.bearerToken } } } }
      : {}),
  };
  const start = `(function () {
  var read = function (id) { return JSON.parse(document.getElementById(id).textContent); };
  var configuration = read('plinth-scalar-configuration');
  configuration.content = read('plinth-openapi');
  // The page is served by the API it documents (or by its proxy): try requests against this origin.
  configuration.servers = [{ url: window.location.origin, description: 'This server' }];
  // Not #api-reference: Scalar's bundle mounts a second, unconfigured reference on that id by itself.
  Scalar.createApiReference('#reference', configuration);
})();`;
  return page(
    settings.title,
    '',
    [
      '<div id="reference"></div>',
      jsonScript('plinth-openapi', document),
      jsonScript('plinth-scalar-configuration', configuration),
      `<script>${scriptText(vendored('scalar'))}</script>`,
      `<script>${start}</script>`,
    ].join('\n'),
  );
}

/**
 * GraphiQL with React 18's UMD builds and graphql-ws's client, all inlined. The fetcher sends
 * queries and mutations to the page's own URL and subscriptions over graphql-ws to
 * `<url>/subscriptions`, with the headers of the headers editor (pre-filled with the bearer token)
 * as the connection_init payload; a change of headers opens a new WebSocket.
 */
export function graphiqlPage(settings: { title: string; bearerToken: string | undefined }): string {
  const start = `(function () {
  var settings = JSON.parse(document.getElementById('plinth-graphiql-settings').textContent);
  var url = window.location.origin + window.location.pathname.replace(/\\/+$/, '');
  var wsUrl = url.replace(/^http/, 'ws') + '/subscriptions';
  var current = { key: null, fetcher: null, client: null };
  function fetcher(params, options) {
    var headers = (options && options.headers) || {};
    var key = JSON.stringify(headers);
    if (current.key !== key) {
      if (current.client) current.client.dispose();
      var client = graphqlWs.createClient({ url: wsUrl, lazy: true, connectionParams: { headers: headers } });
      current = { key: key, client: client, fetcher: GraphiQL.createFetcher({ url: url, wsClient: client }) };
    }
    return current.fetcher(params, options);
  }
  var initialQuery = new URLSearchParams(window.location.search).get('query');
  ReactDOM.createRoot(document.getElementById('graphiql')).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultHeaders: settings.headers,
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false,
      defaultEditorToolsVisibility: settings.headers ? 'headers' : false,
      query: initialQuery || undefined,
    }),
  );
})();`;
  const headers = settings.bearerToken ? JSON.stringify({ Authorization: `Bearer ${settings.bearerToken}` }, null, 2) : undefined;
  return page(
    `GraphiQL · ${settings.title}`,
    [`<style>${vendored('graphiqlCss').replace(/<\/(style)/gi, '<\\/$1')}</style>`, '<style>body { margin: 0; } #graphiql { height: 100vh; }</style>'].join(
      '\n',
    ),
    [
      '<div id="graphiql"></div>',
      jsonScript('plinth-graphiql-settings', { headers }),
      ...(['react', 'reactDom', 'graphqlWs', 'graphiql'] as const).map((name) => `<script>${scriptText(vendored(name))}</script>`),
      `<script>${start}</script>`,
    ].join('\n'),
  );
}
