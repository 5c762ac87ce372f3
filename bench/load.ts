import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ServerProcess } from './processes';
import { median, percentile } from './statistics';

/**
 * Load on benchmark servers, as the throughput benchmarks share it: autocannon against one server
 * at a time in turns, the server's CPU time and resident memory read around each slice, the
 * figures merged per server, summarised over rounds, compared as ratios and printed as a table.
 */

const RSS_SAMPLE_INTERVAL_MS = 500;
const MIB = 1024 * 1024;

/** What the load takes from a benchmark's settings. */
export interface LoadSettings {
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  rounds: number;
  /** Slices a round's measurement of each query takes turns in, server after server. */
  slices: number;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /**
   * Server-process CPU time per response. Unlike req/s it hardly depends on what else the
   * machine runs, so it is the steadier figure when the machine is shared.
   */
  serverCpuMicrosPerRequest: number;
  /** The server's resident memory right after it started (before any request). */
  startRssBytes: number;
  /** The resident memory BENCH_QUIET seconds after every server had started, before any load (the first round's runs only). */
  startQuietRssBytes?: number;
  /** The server's resident memory before the run (idle, after the warm-up when one came before) and the most seen during it. */
  idleRssBytes: number;
  loadedRssBytes: number;
  /** The resident memory BENCH_QUIET seconds after the warm-up, before this run (the first round's runs only). */
  quietRssBytes?: number;
  responses: number;
  durationSeconds: number;
}

/** One measured request: what is sent, and how to tell a right answer (null) from a wrong one (why). */
export interface BenchRequest {
  /** The query's name, for messages. */
  query: string;
  headers: Record<string, string>;
  body: string;
  check(answer: unknown): string | null;
}

/** One request by hand: the server must answer 200 and rightly before it is measured. */
export async function verifyAnswer<Name extends string>(server: ServerProcess<Name>, request: BenchRequest): Promise<void> {
  const response = await fetch(server.url, { method: 'POST', headers: request.headers, body: request.body });
  const text = await response.text();
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  const wrong = response.status !== 200 || answer === undefined ? `HTTP ${response.status}` : request.check(answer);
  if (wrong !== null) {
    throw new Error(`${server.target} answered the ${request.query} query wrongly (${wrong}): ${text.slice(0, 500)}`);
  }
}

/** One stretch of load on one server, before its figures are merged with the server's other slices. */
interface Slice {
  responses: number;
  durationSeconds: number;
  /** Every response's latency (ms). */
  latencies: number[];
  cpuMicros: number;
  idleRssBytes: number;
  loadedRssBytes: number;
}

/**
 * Measures `request` on every server for `durationSeconds` each, in `slices` turns: each turn
 * gives each server an equal share of the time, the order shifting by one server every turn. On
 * a machine whose speed moves by tens of percent within a minute, one server's ten seconds after
 * another's would compare two machines; taking turns every two seconds puts both under the same
 * conditions.
 */
export async function runTurns<Name extends string>(
  servers: ServerProcess<Name>[],
  request: BenchRequest,
  settings: LoadSettings,
): Promise<Map<Name, LoadResult>> {
  const slices = new Map<Name, Slice[]>(servers.map((server) => [server.target, []]));
  const sliceSeconds = settings.durationSeconds / settings.slices;
  for (let turn = 0; turn < settings.slices; turn++) {
    for (let index = 0; index < servers.length; index++) {
      const server = servers[(index + turn) % servers.length];
      slices.get(server.target)!.push(await runSlice(server, request, settings.connections, sliceSeconds));
    }
  }
  return new Map(servers.map((server) => [server.target, mergeSlices(server, slices.get(server.target)!)]));
}

function mergeSlices<Name extends string>(server: ServerProcess<Name>, slices: Slice[]): LoadResult {
  const responses = slices.reduce((sum, slice) => sum + slice.responses, 0);
  const durationSeconds = slices.reduce((sum, slice) => sum + slice.durationSeconds, 0);
  const sorted = Float64Array.from(slices.flatMap((slice) => slice.latencies)).sort();
  return {
    requestsPerSecond: responses / durationSeconds,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    meanMs: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
    serverCpuMicrosPerRequest: slices.reduce((sum, slice) => sum + slice.cpuMicros, 0) / responses,
    startRssBytes: server.startRssBytes,
    idleRssBytes: slices[0].idleRssBytes,
    loadedRssBytes: Math.max(...slices.map((slice) => slice.loadedRssBytes)),
    responses,
    durationSeconds,
  };
}

/** Load on one server for `durationSeconds`, with its CPU time and resident memory. */
export async function runSlice<Name extends string>(
  server: ServerProcess<Name>,
  request: BenchRequest,
  connections: number,
  durationSeconds: number,
): Promise<Slice> {
  const before = await server.usage();
  let loadedRssBytes = before.rssBytes;
  // Sampled while the load runs (the server answers between requests, so this is under load).
  const sampler = setInterval(() => {
    void server.usage().then(({ rssBytes }) => (loadedRssBytes = Math.max(loadedRssBytes, rssBytes)));
  }, RSS_SAMPLE_INTERVAL_MS);
  const result = await runAutocannon(server, request, connections, durationSeconds).finally(() => clearInterval(sampler));
  const after = await server.usage();
  return { ...result, cpuMicros: after.micros - before.micros, idleRssBytes: before.rssBytes, loadedRssBytes: Math.max(loadedRssBytes, after.rssBytes) };
}

/**
 * Runs autocannon against the server. Latencies are taken from the per-response event
 * (fractional ms) because autocannon's own histogram rounds to whole milliseconds, too coarse
 * for a query answered in about one.
 */
function runAutocannon<Name extends string>(
  server: ServerProcess<Name>,
  request: BenchRequest,
  connections: number,
  durationSeconds: number,
): Promise<Pick<Slice, 'responses' | 'durationSeconds' | 'latencies'>> {
  // Required here, in the parent only: a server process (this script as `serve`) should not hold it.
  const autocannon = require('autocannon') as typeof import('autocannon');
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        method: 'POST',
        headers: request.headers,
        body: request.body,
        connections,
        pipelining: 1,
        duration: durationSeconds,
      },
      (error, result) => {
        if (error) return reject(error);
        if (result.non2xx !== 0 || result.errors !== 0 || result.timeouts !== 0 || result['2xx'] === 0) {
          return reject(
            new Error(
              `${server.target} (${request.query}): ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts ` +
                `(${result['2xx']} 2xx); the measurement is not valid`,
            ),
          );
        }
        // Completed 2xx over the measured time (autocannon's per-second average drops partial seconds).
        resolve({ responses: result['2xx'], durationSeconds: result.duration, latencies });
      },
    );
    instance.on('response', (_client, _statusCode, _bytes, responseTime) => {
      latencies.push(responseTime);
    });
  });
}

function summarise(runs: LoadResult[]): LoadResult {
  return {
    requestsPerSecond: median(runs.map((run) => run.requestsPerSecond)),
    p50Ms: median(runs.map((run) => run.p50Ms)),
    p99Ms: median(runs.map((run) => run.p99Ms)),
    meanMs: median(runs.map((run) => run.meanMs)),
    serverCpuMicrosPerRequest: median(runs.map((run) => run.serverCpuMicrosPerRequest)),
    startRssBytes: runs[0].startRssBytes,
    startQuietRssBytes: runs[0].startQuietRssBytes,
    idleRssBytes: median(runs.map((run) => run.idleRssBytes)),
    loadedRssBytes: Math.max(...runs.map((run) => run.loadedRssBytes)),
    quietRssBytes: runs[0].quietRssBytes,
    responses: runs.reduce((sum, run) => sum + run.responses, 0),
    durationSeconds: runs.reduce((sum, run) => sum + run.durationSeconds, 0),
  };
}

interface RatioReport {
  name: string;
  /** Median over rounds of the ratio within each round (rounds pair up under the same load). */
  value: number;
  perRound: number[];
  /** The same ratio from server CPU per request (baseline µs / full µs): throughput if each were CPU-bound. */
  byServerCpu: number;
  /** null: shown for information, no target. */
  minimum: number | null;
  /** What a ratio without a target shows. */
  note: string | undefined;
  met: boolean;
}

/** A ratio of requests per second to report: the subject's over `baseline`'s, with its target (null: none). */
export interface RatioTarget<Name extends string> {
  name: string;
  baseline: Name;
  minimum: number | null;
  note?: string;
}

/** The ratios of `subject`'s runs to each baseline's, round by round. */
function ratios<Name extends string>(runs: Map<Name, LoadResult[]>, rounds: number, subject: Name, targets: readonly RatioTarget<Name>[]): RatioReport[] {
  const full = runs.get(subject);
  if (!full) return [];
  return targets.flatMap((target) => {
    const { name, baseline, minimum } = target;
    const note = target.note;
    const base = runs.get(baseline);
    if (!base) return [];
    const perRound = Array.from({ length: rounds }, (_, round) => full[round].requestsPerSecond / base[round].requestsPerSecond);
    const value = median(perRound);
    const byServerCpu = median(Array.from({ length: rounds }, (_, round) => base[round].serverCpuMicrosPerRequest / full[round].serverCpuMicrosPerRequest));
    return [{ name, value, perRound, byServerCpu, minimum, note, met: minimum === null || value >= minimum }];
  });
}

/** The table of `summaries` (each server under its label) for one query, and the ratios under it. */
function printReport<Name extends string>(
  query: string,
  summaries: Map<Name, LoadResult>,
  labels: Record<Name, string>,
  ratioReports: RatioReport[],
  settings: LoadSettings,
): void {
  const fixed = (value: number, digits: number) => value.toFixed(digits);
  const rows = [...summaries].map(([target, result]) => [
    labels[target],
    fixed(result.requestsPerSecond, 0),
    fixed(result.p50Ms, 2),
    fixed(result.p99Ms, 2),
    fixed(result.serverCpuMicrosPerRequest, 0),
    fixed(result.startRssBytes / MIB, 0),
    result.startQuietRssBytes === undefined ? '-' : fixed(result.startQuietRssBytes / MIB, 0),
    fixed(result.idleRssBytes / MIB, 0),
    result.quietRssBytes === undefined ? '-' : fixed(result.quietRssBytes / MIB, 0),
    fixed(result.loadedRssBytes / MIB, 0),
  ]);
  const header = [
    'server',
    'req/s',
    'p50 ms',
    'p99 ms',
    'server CPU µs/req',
    'RSS start MiB',
    'RSS start quiet MiB',
    'RSS idle MiB',
    'RSS quiet MiB',
    'RSS load MiB',
  ];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[0]) : cell.padStart(widths[column]))).join('   ');
  const rule = '-'.repeat(line(header).length);

  console.log(
    `\nquery "${query}": ${settings.connections} connections, pipelining 1, ${settings.warmupSeconds} s warm-up, ` +
      `${settings.durationSeconds} s measured in ${settings.slices} turns x ${settings.rounds} round(s)${settings.rounds > 1 ? ' (medians)' : ''}`,
  );
  console.log([rule, line(header), rule, ...rows.map(line), rule].join('\n'));
  for (const ratio of ratioReports) {
    const rounds = ratio.perRound.length > 1 ? `  rounds: ${ratio.perRound.map((value) => value.toFixed(2)).join(', ')}` : '';
    console.log(
      `${ratio.name.padEnd(9)} ${ratio.value.toFixed(2)}x   ` +
        (ratio.minimum === null ? (ratio.note ?? 'no target').padEnd(26) : `target >= ${ratio.minimum.toFixed(2)}x   ${ratio.met ? 'MET   ' : 'MISSED'}`) +
        `   (by server CPU per request: ${ratio.byServerCpu.toFixed(2)}x)${rounds}`,
    );
  }
}

/**
 * Prints each query's table and the ratios of `subject` to the baselines, and the load average
 * since `loadAverageBefore`; writes `recorded` with the machine and every round's figures to `file`.
 */
export function reportRuns<Name extends string>(options: {
  runs: Map<string, Map<Name, LoadResult[]>>;
  subject: Name;
  labels: Record<Name, string>;
  ratioTargets: readonly RatioTarget<Name>[];
  settings: LoadSettings;
  loadAverageBefore: number[];
  recorded: Record<string, unknown>;
  file: string;
}): void {
  const { runs, subject, labels, ratioTargets, settings, loadAverageBefore, file } = options;
  const machine = { node: process.version, cpus: os.cpus().length, loadAverageBefore, loadAverageAfter: os.loadavg() };
  const results: Record<string, unknown> = {};
  for (const [query, byTarget] of runs) {
    const summaries = new Map([...byTarget].map(([target, rounds]) => [target, summarise(rounds)]));
    const ratioReports = ratios(byTarget, settings.rounds, subject, ratioTargets);
    printReport(query, summaries, labels, ratioReports, settings);
    results[query] = {
      servers: Object.fromEntries([...summaries].map(([target, summary]) => [target, { ...summary, rounds: byTarget.get(target) }])),
      ratios: ratioReports,
    };
  }
  const loads = (values: number[]) => values.map((value) => value.toFixed(2)).join(' ');
  console.log(`\nload average before ${loads(loadAverageBefore)}, after ${loads(machine.loadAverageAfter)}`);
  fs.writeFileSync(file, `${JSON.stringify({ finishedAt: new Date().toISOString(), ...options.recorded, machine, results }, null, 2)}\n`);
  console.log(`\nresults written to ${path.relative(process.cwd(), file) || file}`);
}
