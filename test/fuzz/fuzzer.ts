import { randomUUID } from 'node:crypto';
import path from 'node:path';
import fc from 'fast-check';
import { buildClientSchema, getIntrospectionQuery, type IntrospectionQuery } from 'graphql';
import { Agent, fetch, type RequestInit } from 'undici';
import WebSocket from 'ws';
import { ADMIN_SECRET } from '../support/server';
import { parsePrometheus, sampleValue } from '../support/prometheus';
import { signToken, unsignedToken } from '../support/tokens';
import { graphqlCases, type GraphQLCase } from './graphql-cases';
import { restCases, type RestCase, type RouteSummary } from './rest-cases';
import { tableCases, type TableCase } from './table-cases';
import { setUpTables } from './tables-setup';
import { webSocketCases, type WebSocketCase } from './ws-cases';

/** The server under test, as the fuzzer reaches and watches it. */
export interface FuzzTarget {
  url: string;
  routes: readonly RouteSummary[];
  /** Every log line at error level or above so far. */
  errorLines(): readonly string[];
  residentBytes(): number;
  /** Writes a heap snapshot of the server to `file` (after a full garbage collection); resolves with its path. */
  writeHeapSnapshot(file: string): Promise<string>;
}

export interface FuzzOptions {
  seed: number;
  seconds: number;
  /** fast-check's path of a failing case, to replay it alone. */
  path?: string;
  /**
   * Stop after this many cases (or `seconds`, whichever comes first): with the same seed, the
   * same requests whatever the machine's speed, to compare two builds on a busy machine.
   */
  cases?: number;
  /** How long to watch resident memory settle after the run (default SETTLE_SECONDS). */
  settleSeconds?: number;
  /**
   * Stop watching as soon as resident memory is within SETTLED_BOUND (the test suite's choice, to
   * keep CI short); otherwise the last sample is taken at settleSeconds, whatever it is.
   */
  stopWhenSettled?: boolean;
  /** A folder to write the server's heap snapshots to: warmed up, right after the run, settled. */
  heapSnapshots?: string;
}

export interface FuzzReport {
  seed: number;
  cases: number;
  requests: number;
  statuses: Record<string, number>;
  webSocketCloses: Record<string, number>;
  /**
   * The server's resident memory in bytes: warmed up and idle, the highest sample during the run,
   * right after it, and settled: the last sample of the settling time, taken `settledSeconds`
   * after the run.
   */
  rss: { warm: number; peak: number; after: number; settled: number; settledSeconds: number };
  /**
   * The server's own account (its /metrics), warmed up and right after the run, with resident
   * memory at the same moment: to tell V8's heap from native memory (resident minus the heap's total).
   */
  heap: { warm: HeapAccount; after: HeapAccount };
  slowest: { ms: number; case: string };
  /**
   * The cases over the generated API (tracked tables, and actions with relationships to them): how
   * many, and the 200 answers whose root field had data, by credentials.
   */
  tables: { cases: number; answered: Record<string, number> };
  failure?: { message: string; counterexample: string; path: string };
}

export interface HeapAccount {
  used: number;
  total: number;
  external: number;
  resident: number;
}

type FuzzCase = GraphQLCase | TableCase | RestCase | WebSocketCase;

const GRAPHQL_PATH = '/v1/graphql';
const REQUEST_TIMEOUT_MS = 10_000;
/**
 * Node's HTTP parser reads at most 16 KiB of request line and headers: past it the server answers
 * 431 and closes the connection, so a client still writing its request line may see a reset instead.
 */
const REQUEST_HEAD_LIMIT = 16 * 1024;
const CONNECTION_FAILED = 'the connection failed';
/** Resident memory may grow to this multiple of its warmed-up size during the run... */
const MEMORY_BOUND = 2;
/** ...and must be back within this multiple of it within SETTLE_SECONDS of the run's end. */
const SETTLED_BOUND = 1.5;
const SETTLE_SECONDS = 60;
/** How long the server is left quiet after the warm-up before its idle size is taken. */
const WARM_IDLE_MS = 9000;
/** How often resident memory is sampled, during the run and while it settles. */
const RSS_SAMPLE_MS = 250;
const STACK_TRACE = /\n\s+at \S+|\bat .+:\d+:\d+\)|"stack"/;
const INTERNAL_CODES = /"(INTERNAL_SERVER_ERROR|INTERNAL_ERROR)"/;

/** Who the case claims to be, as request headers. */
function credentialHeaders(name: string): Record<string, string> {
  switch (name) {
    case 'admin':
      return { 'x-gql-admin-secret': ADMIN_SECRET };
    case 'admin-as-user':
      return { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': randomUUID() };
    case 'user':
      return { authorization: `Bearer ${signToken()}` };
    case 'user-other-role':
      return { authorization: `Bearer ${signToken({ roles: ['user', 'editor'] })}`, 'x-gql-role': 'editor' };
    case 'wrong-role':
      return { authorization: `Bearer ${signToken()}`, 'x-gql-role': 'admin' };
    case 'wrong-secret':
      return { 'x-gql-admin-secret': 'not-the-secret' };
    case 'expired':
      return { authorization: `Bearer ${signToken({ expiresIn: -60 })}` };
    case 'alg-none':
      return { authorization: `Bearer ${unsignedToken()}` };
    case 'garbage-token':
      return { authorization: 'Bearer abc.def.ghi' };
    case 'basic':
      return { authorization: 'Basic Zm9vOmJhcg==' };
    default:
      return {};
  }
}

const CREDENTIALS = fc.constantFrom(
  'admin',
  'admin-as-user',
  'user',
  'user-other-role',
  'anonymous',
  'anonymous',
  'wrong-role',
  'wrong-secret',
  'expired',
  'alg-none',
  'garbage-token',
  'basic',
);

/**
 * What is wrong with an HTTP answer, or undefined when it is a proper answer. The only HTML the
 * server sends is its vendored pages (the API reference, GraphiQL), whose scripts mention stacks
 * and error codes: only their status counts.
 */
function httpProblem(status: number, text: string, contentType: string | null): string | undefined {
  if (status >= 500) return `answered ${status}: ${text.slice(0, 300)}`;
  if (contentType?.startsWith('text/html')) return undefined;
  if (INTERNAL_CODES.test(text)) return `answered an internal error: ${text.slice(0, 300)}`;
  if (STACK_TRACE.test(text)) return `answered a stack trace: ${text.slice(0, 300)}`;
  return undefined;
}

async function sendHttp(
  connections: Agent,
  url: string,
  init: RequestInit,
): Promise<{ status: number; text: string; contentType: string | null } | { problem: string }> {
  try {
    // A redirect is the server's answer (the auth service's links, the newsletter's form proxy): it
    // is checked, not followed (it may lead to PLINTH_PUBLIC_URL, http://localhost:0 in tests).
    const response = await fetch(url, { ...init, redirect: 'manual', dispatcher: connections, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    return { status: response.status, text: await response.text(), contentType: response.headers.get('content-type') };
  } catch (error) {
    const name = (error as Error).name;
    if (name === 'TimeoutError') return { problem: `no answer within ${REQUEST_TIMEOUT_MS} ms` };
    // A request fetch itself refuses to send (an invalid header value) never reached the server.
    // (Compared by name: under jest, fetch's TypeError comes from another realm.)
    if (name === 'TypeError' && !(error as { cause?: unknown }).cause) return { status: 0, text: '', contentType: null };
    return { problem: `${CONNECTION_FAILED}: ${(error as Error).message} ${String((error as { cause?: unknown }).cause ?? '')}` };
  }
}

function graphqlRequest(base: string, c: GraphQLCase): [string, RequestInit] {
  const headers: Record<string, string> = { ...credentialHeaders(c.credentials) };
  if (c.accept !== undefined) headers.accept = c.accept;
  if (c.method === 'GET') {
    const body = (c.body && typeof c.body === 'object' && !Array.isArray(c.body) ? c.body : { query: c.body }) as Record<string, unknown>;
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(body)) search.set(key, typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));
    return [`${base}${GRAPHQL_PATH}?${search}`, { method: 'GET', headers }];
  }
  headers['content-type'] = c.contentType ?? 'application/json';
  return [`${base}${GRAPHQL_PATH}`, { method: 'POST', headers, body: JSON.stringify(c.body) ?? 'null' }];
}

function restRequest(base: string, c: RestCase): [string, RequestInit] {
  const headers: Record<string, string> = { ...credentialHeaders(c.credentials), ...c.headers };
  if (c.contentType) headers['content-type'] = c.contentType;
  // fetch refuses to send a body with GET or HEAD.
  const bodyless = c.body === undefined || c.method === 'GET' || c.method === 'HEAD';
  const body = bodyless ? undefined : typeof c.body === 'string' ? c.body : (JSON.stringify(c.body) ?? 'null');
  return [`${base}${c.path}`, { method: c.method, headers, body }];
}

/** Plays a graphql-ws conversation; the server may close only with a 44xx code. */
function playWebSocket(base: string, c: WebSocketCase): Promise<{ closedBy: 'server' | 'client'; code: number } | { problem: string }> {
  return new Promise((resolve) => {
    const url = `${base.replace(/^http/, 'ws')}${GRAPHQL_PATH}/subscriptions`;
    const socket = c.protocol === null ? new WebSocket(url) : new WebSocket(url, c.protocol);
    let clientClosing = false;
    // The ws client itself aborts when the server picks none of the subprotocols it offered.
    let clientAborted = false;
    const hung = setTimeout(() => {
      socket.terminate();
      resolve({ problem: `the WebSocket conversation did not end within ${REQUEST_TIMEOUT_MS} ms` });
    }, REQUEST_TIMEOUT_MS);
    const playFrames = async () => {
      for (const frame of c.frames) {
        if (socket.readyState !== WebSocket.OPEN) break;
        socket.send(frame);
        await new Promise((next) => setTimeout(next, 5));
      }
      setTimeout(() => {
        clientClosing = true;
        if (socket.readyState === WebSocket.OPEN) socket.close(1000, 'fuzz case done');
      }, 120);
    };
    socket.on('open', () => {
      playFrames().catch((error: unknown) => {
        clearTimeout(hung);
        socket.terminate();
        resolve({ problem: `the client could not send the case's frames: ${String(error)}` });
      });
    });
    socket.on('message', (data) => {
      const text = String(data);
      if (STACK_TRACE.test(text) || INTERNAL_CODES.test(text)) {
        clearTimeout(hung);
        socket.terminate();
        resolve({ problem: `sent ${text.slice(0, 300)}` });
      }
    });
    socket.on('unexpected-response', (_request, response) => {
      clearTimeout(hung);
      resolve(
        response.statusCode && response.statusCode >= 500
          ? { problem: `refused the upgrade with ${response.statusCode}` }
          : { closedBy: 'server', code: response.statusCode ?? 0 },
      );
      socket.terminate();
    });
    socket.on('error', (error) => {
      if (/subprotocol/i.test(error.message)) clientAborted = true;
    });
    socket.on('close', (code) => {
      clearTimeout(hung);
      resolve({ closedBy: clientClosing || clientAborted ? 'client' : 'server', code });
    });
  });
}

/** Fetches the schema by introspection, as an explorer would (with `credentials`: the schema they are served). */
async function introspect(base: string, credentials = 'admin') {
  const response = await fetch(`${base}${GRAPHQL_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...credentialHeaders(credentials) },
    body: JSON.stringify({ query: getIntrospectionQuery() }),
  });
  const { data } = (await response.json()) as { data: IntrospectionQuery };
  return buildClientSchema(data);
}

/**
 * Sends random, boundary and malformed requests to every surface the server has, discovered at
 * run time (root fields by introspection, REST routes from the route table, graphql-ws), and
 * stops at the first case the server answers badly: a 5xx, an internal error, a stack trace, an
 * error-level log line, no answer, a WebSocket close outside 44xx. Then checks memory.
 */
export async function fuzz(target: FuzzTarget, options: FuzzOptions): Promise<FuzzReport> {
  /*
   * The fuzzer's connections: idle ones are dropped after a second, well before the server's
   * keep-alive timeout (5 s), so a request never races the server closing its idle socket (which
   * looks like "other side closed" and is no fault of either). Closed at the end, so nothing is
   * left open behind the run.
   */
  const connections = new Agent({ keepAliveTimeout: 1000, keepAliveMaxTimeout: 1000 });
  // Tracked tables and actions related to them, before the schema is read: the generated API is fuzzed too.
  const stopTables = await setUpTables(target.url);
  try {
    return await fuzzWith(connections, target, options);
  } finally {
    await connections.close();
    await stopTables();
  }
}

async function fuzzWith(connections: Agent, target: FuzzTarget, options: FuzzOptions): Promise<FuzzReport> {
  const schema = await introspect(target.url);
  // Each role is served its own view of the tables: table cases are built on the view of their credentials.
  const userSchema = await introspect(target.url, 'user');
  const tableQueries = tableCases({
    admin: schema,
    user: userSchema,
    'admin-as-user': userSchema,
    'user-other-role': await introspect(target.url, 'user-other-role'),
  });
  const subscriptionFields = Object.keys(schema.getSubscriptionType()?.getFields() ?? {});
  const subscriptionQueries = fc.oneof(
    fc.constantFrom(
      ...subscriptionFields.map((name) => `subscription { ${name} { __typename } }`),
      'subscription { nope }',
      '{ session { role } }',
      'subscription {',
    ),
    fc.string(),
  );
  const wsCredentials = fc.constantFrom(
    { headers: credentialHeaders('admin') },
    { headers: credentialHeaders('user') },
    credentialHeaders('expired'),
    {},
    { headers: 'not an object' },
  );
  const cases: fc.Arbitrary<FuzzCase> = fc.oneof(
    { weight: 5, arbitrary: graphqlCases(schema, CREDENTIALS) },
    ...(tableQueries ? [{ weight: 3, arbitrary: tableQueries }] : []),
    { weight: 3, arbitrary: restCases(target.routes, CREDENTIALS, (url) => url === GRAPHQL_PATH) },
    { weight: 1, arbitrary: webSocketCases(wsCredentials, subscriptionQueries) },
  );

  const report: FuzzReport = {
    seed: options.seed,
    cases: 0,
    requests: 0,
    statuses: {},
    webSocketCloses: {},
    rss: { warm: 0, peak: 0, after: 0, settled: 0, settledSeconds: 0 },
    heap: { warm: { used: 0, total: 0, external: 0, resident: 0 }, after: { used: 0, total: 0, external: 0, resident: 0 } },
    slowest: { ms: 0, case: '' },
    tables: { cases: 0, answered: {} },
  };
  const snapshot = async (name: string) => {
    if (options.heapSnapshots)
      process.stdout.write(`heap snapshot: ${await target.writeHeapSnapshot(path.resolve(options.heapSnapshots, `${name}.heapsnapshot`))}\n`);
  };
  // Warm-up is ordinary traffic, so the memory bound is against the server as it normally runs.
  for (let i = 0; i < 200; i++)
    await sendHttp(connections, `${target.url}${GRAPHQL_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `{ session { role } n${i}: __typename }` }),
    });
  // So is a first visit to every page: some are built on their first request (the API reference, GraphiQL) and kept.
  const pages = target.routes.filter((route) => [route.method].flat().includes('GET') && !route.url.includes(':') && route.url !== '*');
  for (const route of pages) await sendHttp(connections, `${target.url}${route.url}`, { headers: { accept: 'text/html' } });
  // Idle, as a quiet server is: the start-up collection's two collections (1 and 7 s into the first quiet spell) are done.
  await sleep(WARM_IDLE_MS);
  report.rss.warm = report.rss.peak = target.residentBytes();
  report.heap.warm = await heapAccount(target);
  // Writing a snapshot takes memory of its own: a run that writes them measures for finding, not for judging.
  await snapshot('warm');
  const peakSampler = setInterval(() => (report.rss.peak = Math.max(report.rss.peak, target.residentBytes())), RSS_SAMPLE_MS);

  const problemOf = async (c: FuzzCase): Promise<string | undefined> => {
    report.cases += 1;
    const errorsBefore = target.errorLines().length;
    const started = performance.now();
    let problem: string | undefined;
    if (c.kind === 'ws') {
      const outcome = await playWebSocket(target.url, c);
      if ('problem' in outcome) problem = outcome.problem;
      else {
        const key = `${outcome.closedBy} ${outcome.code}`;
        report.webSocketCloses[key] = (report.webSocketCloses[key] ?? 0) + 1;
        const fine = outcome.closedBy === 'client' || (outcome.code >= 4400 && outcome.code <= 4499) || (outcome.code >= 400 && outcome.code < 500);
        if (!fine) problem = `the server closed the WebSocket with ${outcome.code}`;
      }
    } else {
      const [url, init] = c.kind === 'graphql' ? graphqlRequest(target.url, c) : restRequest(target.url, c);
      report.requests += 1;
      const outcome = await sendHttp(connections, url, init);
      // fetch adds a few hundred bytes of headers of its own: near the limit, either answer is right.
      const headLength = url.length + Object.entries(init.headers ?? {}).reduce((sum, [name, value]) => sum + name.length + String(value).length + 4, 0);
      const overLimit = url.length > REQUEST_HEAD_LIMIT;
      const nearLimit = headLength + 1024 > REQUEST_HEAD_LIMIT;
      if ('problem' in outcome) {
        if (nearLimit && outcome.problem.startsWith(CONNECTION_FAILED)) report.statuses[431] = (report.statuses[431] ?? 0) + 1;
        else problem = outcome.problem;
      } else if (overLimit && outcome.status !== 431) problem = `a request line of ${url.length} characters was answered ${outcome.status}, not 431`;
      else {
        report.statuses[outcome.status] = (report.statuses[outcome.status] ?? 0) + 1;
        problem = httpProblem(outcome.status, outcome.text, outcome.contentType);
        if ('tables' in c) countTableAnswer(report, c, outcome.status, outcome.text);
      }
    }
    const ms = performance.now() - started;
    if (ms > report.slowest.ms) report.slowest = { ms, case: fc.stringify(c).slice(0, 300) };
    const newErrors = target.errorLines().slice(errorsBefore);
    if (!problem && newErrors.length > 0) problem = `logged at error level: ${newErrors[0].slice(0, 500)}`;
    return problem;
  };

  const details = await fc
    .check(
      fc.asyncProperty(cases, async (c) => {
        const problem = await problemOf(c);
        if (problem) throw new Error(problem);
      }),
      {
        seed: options.seed,
        path: options.path,
        numRuns: options.path ? 1 : (options.cases ?? 100_000_000),
        interruptAfterTimeLimit: options.seconds * 1000,
        markInterruptAsFailure: false,
        endOnFailure: true,
      },
    )
    .finally(() => clearInterval(peakSampler));
  report.rss.after = target.residentBytes();
  report.rss.peak = Math.max(report.rss.peak, report.rss.after);
  report.heap.after = await heapAccount(target);
  await snapshot('after');
  await settle(target, report, options);
  await snapshot('settled');
  // Log lines travel separately from answers: one written just after its answer arrives late.
  await sleep(200);
  if (details.failed) {
    report.failure = {
      message: String((details.errorInstance as Error | undefined)?.message ?? details.errorInstance),
      counterexample: fc.stringify(details.counterexample),
      path: details.counterexamplePath ?? '',
    };
  } else if (target.errorLines().length > 0) {
    report.failure = { message: `logged at error level: ${target.errorLines()[0].slice(0, 500)}`, counterexample: '', path: '' };
  } else if (report.rss.peak > MEMORY_BOUND * report.rss.warm) {
    report.failure = {
      message: `resident memory grew from ${report.rss.warm} to ${report.rss.peak} bytes (bound: ${MEMORY_BOUND}x)`,
      counterexample: '',
      path: '',
    };
  } else if (report.rss.settled > SETTLED_BOUND * report.rss.warm) {
    const message = `resident memory was ${report.rss.settled} bytes ${report.rss.settledSeconds} s after the run, ${report.rss.warm} warm (bound: ${SETTLED_BOUND}x)`;
    report.failure = { message, counterexample: '', path: '' };
  }
  return report;
}

/** Counts a table case, and its answer when it is a 200 whose root field has data (rows, an object, an aggregate). */
function countTableAnswer(report: FuzzReport, c: TableCase, status: number, text: string): void {
  report.tables.cases += 1;
  if (status !== 200) return;
  let body: { data?: Record<string, unknown> | null } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return;
  }
  const value = body?.data?.[c.tables.root];
  if (value === null || value === undefined || (Array.isArray(value) && value.length === 0)) return;
  report.tables.answered[c.credentials] = (report.tables.answered[c.credentials] ?? 0) + 1;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function heapAccount(target: FuzzTarget): Promise<HeapAccount> {
  const metrics = parsePrometheus(await (await fetch(`${target.url}/metrics`)).text());
  return {
    used: sampleValue(metrics, 'nodejs_heap_size_used_bytes') ?? 0,
    total: sampleValue(metrics, 'nodejs_heap_size_total_bytes') ?? 0,
    external: sampleValue(metrics, 'nodejs_external_memory_bytes') ?? 0,
    resident: target.residentBytes(),
  };
}

/**
 * Watches the idle server's resident memory after the run, for settleSeconds: the memory a run
 * leaves behind must be given back (caches bounded, garbage collected) without further requests.
 */
async function settle(target: FuzzTarget, report: FuzzReport, options: FuzzOptions): Promise<void> {
  const seconds = options.settleSeconds ?? SETTLE_SECONDS;
  const started = performance.now();
  for (;;) {
    const elapsed = (performance.now() - started) / 1000;
    report.rss.settled = target.residentBytes();
    report.rss.settledSeconds = Math.round(elapsed);
    if (elapsed >= seconds || (options.stopWhenSettled && report.rss.settled <= SETTLED_BOUND * report.rss.warm)) return;
    await sleep(RSS_SAMPLE_MS * 4);
  }
}

/** The report as a person reads it, with the command that replays a failure. */
export function describeReport(report: FuzzReport): string {
  const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
  const { warm, peak, after, settled, settledSeconds } = report.rss;
  const times = (bytes: number) => `${(bytes / warm).toFixed(2)}x`;
  const lines = [
    `fuzz seed ${report.seed}: ${report.cases} cases, ${report.requests} HTTP requests`,
    `  statuses: ${JSON.stringify(report.statuses)}`,
    `  WebSocket closes: ${JSON.stringify(report.webSocketCloses)}`,
    `  resident memory: ${mb(warm)} warm (idle), ${mb(peak)} peak (${times(peak)}), ${mb(after)} right after (${times(after)}), ${mb(settled)} ${settledSeconds} s after (${times(settled)})`,
    ...(['warm', 'after'] as const).map((when) => {
      const { used, total, external, resident } = report.heap[when];
      return `  server heap ${when === 'warm' ? 'warm' : 'right after'}: ${mb(used)} used of ${mb(total)}, ${mb(external)} external, ${mb(resident - total)} resident outside the heap`;
    }),
    `  slowest case: ${report.slowest.ms.toFixed(0)} ms: ${report.slowest.case}`,
    `  generated API: ${report.tables.cases} table cases, 200 with table data by credentials: ${JSON.stringify(report.tables.answered)}`,
  ];
  if (report.failure) {
    lines.push(`  FAILED: ${report.failure.message}`, `  case: ${report.failure.counterexample.slice(0, 2000)}`);
    if (report.failure.path) lines.push(`  replay: npm run fuzz -- --seed ${report.seed} --path ${report.failure.path}`);
  }
  return lines.join('\n');
}
