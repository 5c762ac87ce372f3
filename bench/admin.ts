// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { PasswordHasher } from '../src/common/passwords';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { prepareDatabase } from './database';
import { runSlice, type BenchRequest } from './load';
import { benchEntry, forkServer, listen, type BenchServer, type ServerProcess } from './processes';
import { positiveInteger } from './settings';
import { SESSION_QUERY, serverEnvironment, signUserToken } from './shared';
import { median, percentile } from './statistics';

/**
 * The admin dashboard's benchmark (issue 33): its first load in Chromium (the login page, then
 * the dashboard after login until each part's health is shown; cold: a new browser profile,
 * warm: the same one again), its assets' compressed total, and GET /api/health's latency while
 * the server is under the GraphQL bench's load (its session query, BENCH_CONNECTIONS
 * connections), beside two baselines under the same load: Plinth's own /healthz on the same
 * server (the floor a route of that process gets) and a bare Fastify route in a process of its own.
 *
 *   npm run bench:admin
 *   BENCH_RUNS=9 BENCH_DURATION=10 npm run bench:admin
 *
 * Environment: BENCH_RUNS (page loads per measure, 7; medians reported), BENCH_DURATION (s of load, 8),
 * BENCH_CONNECTIONS (10), BENCH_LOG_LEVEL (warn), BENCH_DATABASE_URL or DATABASE_URL (else
 * postgres://postgres@127.0.0.1:5432/plinth_bench). Targets: first load under 300 ms, assets
 * under 300 KB gzipped, health under 5 ms at p50 under load. Results in bench/results/admin-latest.json.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
const TARGETS = ['plinth', 'bare-fastify'] as const;
type Target = (typeof TARGETS)[number];
const PASSWORD = 'the admin bench password';
const CHROMIUM = '/usr/bin/chromium';
const FIRST_LOAD_TARGET_MS = 300;
const ASSET_TARGET_BYTES = 300 * 1024;
const HEALTH_P50_TARGET_MS = 5;

/** The forked servers: Plinth with the dashboard on (its port and password hash from the parent), and a bare Fastify route. */
async function start(target: Target): Promise<BenchServer> {
  const logLevel = process.env.BENCH_LOG_LEVEL ?? 'warn';
  if (target === 'bare-fastify') {
    const fastify = (await import('fastify')).default;
    const app = fastify();
    app.get('/health', async () => ({ status: 'ok' }));
    await app.ready();
    return listen(app.server);
  }
  const running = await startServer(
    loadConfig({
      ...serverEnvironment(logLevel, process.env.BENCH_DATABASE_URL),
      PLATFORM_ADMIN_ENABLED: 'true',
      PLATFORM_ADMIN_PORT: process.env.BENCH_ADMIN_PORT!,
      PLATFORM_ADMIN_PASSWORD: process.env.BENCH_ADMIN_PASSWORD_HASH!,
      PLATFORM_PROJECT_PATH: fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-admin-bench-')),
    }),
  );
  return { url: `${running.url}/v1/graphql`, close: async () => void (await running.close()) };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The bytes of an answer as sent (gzip asked for). */
function compressedSize(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'accept-encoding': 'gzip' } }, (response) => {
        let bytes = 0;
        response.on('data', (chunk: Buffer) => (bytes += chunk.length));
        response.on('end', () => resolve(bytes));
      })
      .on('error', reject);
  });
}

async function login(adminUrl: string): Promise<{ cookie: string; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${adminUrl}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: PASSWORD }),
  });
  const ms = performance.now() - started;
  if (response.status !== 200) throw new Error(`the admin login answered ${response.status}: ${await response.text()}`);
  const cookie = response.headers
    .getSetCookie()
    .find((value) => value.startsWith('plinth_admin_session='))!
    .split(';')[0];
  return { cookie, ms };
}

/**
 * Records, in the page, when the login form or the health summary first appears (ms since the
 * navigation started). An init script runs through the debugging protocol, which the page's
 * Content-Security-Policy does not govern.
 */
const SHOWN_OBSERVER = `(() => {
  const seen = () => {
    if (!window.__loginShown && document.getElementById('password')) window.__loginShown = performance.now();
    if (!window.__healthShown && document.querySelector('.summary')) window.__healthShown = performance.now();
  };
  new MutationObserver(seen).observe(document, { childList: true, subtree: true });
})();`;

interface PageLoads {
  loginCold: number[];
  loginWarm: number[];
  dashboardCold: number[];
  dashboardWarm: number[];
  /** The very first load after the server started (nothing read or compressed yet). */
  firstAfterStart: number;
}

async function measurePageLoads(adminUrl: string, runs: number): Promise<PageLoads> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM });
  try {
    const { cookie } = await login(adminUrl);
    const [name, value] = cookie.split('=');
    /** One navigation in `context`: ms until `mark` is set in the page. */
    const load = async (context: import('playwright-core').BrowserContext, mark: '__loginShown' | '__healthShown'): Promise<number> => {
      const page = await context.newPage();
      await page.addInitScript(SHOWN_OBSERVER);
      await page.goto(adminUrl, { waitUntil: 'commit' });
      // A function, not a string: a string is evaluated with eval, which the page's policy refuses.
      await page.waitForFunction((key) => (globalThis as Record<string, unknown>)[key] !== undefined, mark, { polling: 10, timeout: 30_000 });
      const ms = (await page.evaluate(`window.${mark}`)) as number;
      if (process.env.BENCH_TRACE) {
        // Each request's start and end (ms since the navigation started): where a load's time goes.
        const entries = (await page.evaluate(
          `performance.getEntries().filter((entry) => entry.entryType === 'navigation' || entry.entryType === 'resource')` +
            `.map((entry) => [entry.name.replace(location.origin, '').split('/').pop(), Math.round(entry.startTime), Math.round(entry.responseEnd)])`,
        )) as [string, number, number][];
        process.stdout.write(`${mark} at ${Math.round(ms)} ms: ${entries.map(([name, from, to]) => `${name || '/'} ${from}-${to}`).join(', ')}\n`);
      }
      await page.close();
      return ms;
    };
    const newContext = async (loggedIn: boolean) => {
      const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
      if (loggedIn) await context.addCookies([{ name, value, url: adminUrl }]);
      return context;
    };
    const firstContext = await newContext(true);
    const firstAfterStart = await load(firstContext, '__healthShown');
    await firstContext.close();
    const result: PageLoads = { loginCold: [], loginWarm: [], dashboardCold: [], dashboardWarm: [], firstAfterStart };
    for (let run = 0; run < runs; run++) {
      for (const [loggedIn, cold, warm] of [
        [false, result.loginCold, result.loginWarm],
        [true, result.dashboardCold, result.dashboardWarm],
      ] as const) {
        const context = await newContext(loggedIn);
        const mark = loggedIn ? '__healthShown' : '__loginShown';
        cold.push(await load(context, mark));
        warm.push(await load(context, mark));
        await context.close();
      }
    }
    return result;
  } finally {
    await browser.close();
  }
}

async function assetTotal(adminUrl: string): Promise<{ total: number; files: string[] }> {
  const page = await (await fetch(adminUrl)).text();
  const assets = [...page.matchAll(/(?:href|src)="(\/assets\/[^"]+)"/g)].map((match) => match[1]);
  const files: string[] = [];
  let total = await compressedSize(adminUrl);
  files.push(`document ${total} B`);
  for (const asset of assets) {
    const bytes = await compressedSize(`${adminUrl}${asset}`);
    total += bytes;
    files.push(`${asset.split('/').pop()} ${bytes} B`);
  }
  return { total, files };
}

/** Sequential GETs of `url` for `seconds` (one at a time, kept-alive): their latencies in ms. */
async function probe(url: string, headers: Record<string, string>, seconds: number): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  try {
    while (performance.now() < until) {
      const started = performance.now();
      const status = await new Promise<number>((resolve, reject) => {
        http
          .get(url, { agent, headers }, (response) => {
            response.resume();
            response.on('end', () => resolve(response.statusCode ?? 0));
          })
          .on('error', reject);
      });
      if (status !== 200) throw new Error(`${url} answered ${status}`);
      latencies.push(performance.now() - started);
    }
  } finally {
    agent.destroy();
  }
  return latencies;
}

function quantiles(latencies: number[]): { p50: number; p99: number; count: number } {
  const sorted = Float64Array.from(latencies).sort();
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), count: sorted.length };
}

async function run(): Promise<void> {
  const runs = positiveInteger('BENCH_RUNS', 7);
  const duration = positiveInteger('BENCH_DURATION', 8);
  const connections = positiveInteger('BENCH_CONNECTIONS', 10);
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = await prepareDatabase();
  const adminPort = await freePort();
  const hasher = new PasswordHasher(loadConfig(serverEnvironment('warn', databaseUrl)).auth.passwordHash);
  const env = {
    ...process.env,
    NODE_ENV: 'production',
    BENCH_DATABASE_URL: databaseUrl,
    BENCH_ADMIN_PORT: String(adminPort),
    BENCH_ADMIN_PASSWORD_HASH: await hasher.hash(PASSWORD),
  };
  const servers: ServerProcess<Target>[] = [];
  try {
    for (const target of TARGETS) {
      servers.push(await forkServer(__filename, target, { execArgv: [], env, logFile: path.join(RESULTS_DIR, `admin-${target}.log`) }));
    }
    const [plinth, bare] = servers;
    const adminUrl = `http://127.0.0.1:${adminPort}`;
    const mainUrl = plinth.url.replace(/\/v1\/graphql$/, '');

    const loads = await measurePageLoads(adminUrl, runs);
    const assets = await assetTotal(adminUrl);
    const { cookie, ms: loginMs } = await login(adminUrl);

    // The GraphQL bench's load (its session query) on Plinth, while the routes are probed one after another.
    const userId = randomUUID();
    const request: BenchRequest = {
      query: 'session',
      headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${signUserToken(userId, 3600)}` },
      body: JSON.stringify({ query: SESSION_QUERY }),
      check: () => null,
    };
    const probes = { health: [] as number[], healthz: [] as number[], bare: [] as number[], healthIdle: [] as number[] };
    probes.healthIdle = await probe(`${adminUrl}/api/health`, { cookie }, 2);
    // A warm-up, as the GraphQL bench's: the first seconds of load on a fresh server run slower code.
    await runSlice(plinth, request, connections, 3);
    const third = Math.max(2, Math.round(duration / 3));
    for (const [key, url, headers] of [
      ['health', `${adminUrl}/api/health`, { cookie }],
      ['healthz', `${mainUrl}/healthz`, {}],
      ['bare', bare.url.replace(/\/v1\/graphql$/, '/health'), {}],
    ] as const) {
      const loaded = runSlice(plinth, request, connections, third + 1);
      // Half a second for the load to settle first.
      await new Promise((resolve) => setTimeout(resolve, 500));
      probes[key] = await probe(url, headers, third);
      const slice = await loaded;
      process.stdout.write(`load on Plinth while probing ${key}: ${Math.round(slice.responses / slice.durationSeconds)} GraphQL req/s\n`);
    }

    const health = quantiles(probes.health);
    const healthz = quantiles(probes.healthz);
    const bareRoute = quantiles(probes.bare);
    const idle = quantiles(probes.healthIdle);
    const summary = {
      runs,
      firstLoadMs: {
        loginCold: median(loads.loginCold),
        loginWarm: median(loads.loginWarm),
        dashboardCold: median(loads.dashboardCold),
        dashboardWarm: median(loads.dashboardWarm),
        firstAfterServerStart: loads.firstAfterStart,
      },
      loginRoundTripMs: loginMs,
      assetsGzippedBytes: assets.total,
      assets: assets.files,
      healthMs: { idle, underLoad: health, healthzUnderLoad: healthz, bareFastifyUnderLoad: bareRoute },
      ratios: { healthOverHealthz: health.p50 / healthz.p50, healthOverBareFastify: health.p50 / bareRoute.p50 },
    };
    fs.writeFileSync(path.join(RESULTS_DIR, 'admin-latest.json'), `${JSON.stringify(summary, null, 2)}\n`);

    const fixed = (value: number, digits = 1) => value.toFixed(digits);
    const verdict = (ok: boolean) => (ok ? 'ok' : 'OVER');
    const worstLoad = Math.max(summary.firstLoadMs.loginCold, summary.firstLoadMs.dashboardCold);
    const lines = [
      '',
      `Admin dashboard (${runs} runs each, medians; ms from navigation start to the form or the health shown, in Chromium)`,
      `  login page      cold ${fixed(summary.firstLoadMs.loginCold)}  warm ${fixed(summary.firstLoadMs.loginWarm)}`,
      `  dashboard       cold ${fixed(summary.firstLoadMs.dashboardCold)}  warm ${fixed(summary.firstLoadMs.dashboardWarm)}   (logged in)`,
      `  first load after the server started: ${fixed(loads.firstAfterStart)}; the login round trip (argon2id): ${fixed(loginMs)}`,
      `  target: under ${FIRST_LOAD_TARGET_MS} ms cold: ${verdict(worstLoad < FIRST_LOAD_TARGET_MS)}`,
      `Assets gzipped: ${assets.total} B (${assets.files.join(', ')}); target under ${ASSET_TARGET_BYTES} B: ${verdict(assets.total < ASSET_TARGET_BYTES)}`,
      `GET /api/health latency (sequential probes), with Plinth under ${connections} connections of the GraphQL session query:`,
      `  idle                      p50 ${fixed(idle.p50, 2)}  p99 ${fixed(idle.p99, 2)}  (${idle.count})`,
      `  /api/health under load    p50 ${fixed(health.p50, 2)}  p99 ${fixed(health.p99, 2)}  (${health.count})`,
      `  /healthz (same server)    p50 ${fixed(healthz.p50, 2)}  p99 ${fixed(healthz.p99, 2)}  (${healthz.count})`,
      `  bare Fastify route        p50 ${fixed(bareRoute.p50, 2)}  p99 ${fixed(bareRoute.p99, 2)}  (${bareRoute.count})`,
      `  ratio health/healthz p50 ${fixed(summary.ratios.healthOverHealthz, 2)}, health/bare Fastify p50 ${fixed(summary.ratios.healthOverBareFastify, 2)}`,
      `  target: health p50 under ${HEALTH_P50_TARGET_MS} ms under load: ${verdict(health.p50 < HEALTH_P50_TARGET_MS)}`,
      '',
    ];
    process.stdout.write(lines.join('\n'));
  } finally {
    for (const server of servers) await server.stop();
  }
}

benchEntry(TARGETS, start, run);
