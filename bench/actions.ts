import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { createLogger } from '../src/platform/logger';
import { prepareDatabase } from './database';
import { positiveInteger } from './settings';
import { serverEnvironment, signUserToken } from './shared';

/**
 * The overhead of a synchronous user-declared action: the same handler called directly (a POST
 * of Hasura's payload) and through Plinth (a GraphQL mutation with a user token, which Plinth
 * resolves by POSTing to the handler). Plinth and the handler each run in a child process; the
 * calls are made one at a time, alternating, so both see the same machine load.
 *
 *   npm run bench:actions        (BENCH_CALLS, default 2000; BENCH_DATABASE_URL or DATABASE_URL)
 *
 * Target: under 2 ms added at p50.
 */

const USER_ID = '5d3b8f2a-9c1e-4f7a-b6d2-0e4c8a1f3b57';
const OUTPUT = { id: 'b1946ac9-2a0e-4e6b-9f47-0c5a1d2e3f40', title: 'hello', count: 2 };

function startHandler(): void {
  const server = http.createServer((incoming, response) => {
    incoming.resume();
    incoming.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(OUTPUT));
    });
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
  process.on('disconnect', () => process.exit(0));
}

async function startPlinth(): Promise<void> {
  const config = loadConfig({ ...serverEnvironment(process.env.BENCH_LOG_LEVEL ?? 'warn', process.env.BENCH_DATABASE_URL), PLINTH_PROCESS_ROLES: 'api' });
  const server = await startServer(config, createLogger(config));
  process.send?.({ url: server.url });
  process.on('disconnect', () => void server.close().finally(() => process.exit(0)));
}

function child(role: string, env: NodeJS.ProcessEnv = process.env): Promise<{ process: ChildProcess; url: string }> {
  const spawned = fork(__filename, [role], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    spawned.once('message', (message: { url: string }) => resolve({ process: spawned, url: message.url }));
    spawned.once('exit', (code) => reject(new Error(`the ${role} process exited (code ${code}) before it was ready`)));
  });
}

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
}

async function main(): Promise<void> {
  const calls = positiveInteger('BENCH_CALLS', 2000);
  const databaseUrl = await prepareDatabase();
  const handler = await child('handler');
  const plinth = await child('plinth', { ...process.env, BENCH_DATABASE_URL: databaseUrl });
  const agent = new Agent({ connections: 4 });
  try {
    const adminSecret = serverEnvironment('warn').GQL_GRAPHQL_ADMIN_SECRET;
    const metadata = (body: unknown) =>
      request(`${plinth.url}/v1/metadata`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': adminSecret },
        body: JSON.stringify(body),
      }).then((response) => response.body.json());
    await metadata({ type: 'clear_metadata', args: {} });
    const declared = await metadata({
      type: 'bulk',
      args: [
        {
          type: 'set_custom_types',
          args: {
            input_objects: [{ name: 'BenchInput', fields: [{ name: 'title', type: 'String!' }] }],
            objects: [
              {
                name: 'BenchOutput',
                fields: [
                  { name: 'id', type: 'uuid!' },
                  { name: 'title', type: 'String!' },
                  { name: 'count', type: 'Int!' },
                ],
              },
            ],
          },
        },
        {
          type: 'create_action',
          args: {
            name: 'benchAction',
            definition: { arguments: [{ name: 'input', type: 'BenchInput!' }], output_type: 'BenchOutput', handler: `${handler.url}/bench-action` },
          },
        },
        { type: 'create_action_permission', args: { action: 'benchAction', role: 'user' } },
      ],
    });
    if (!Array.isArray(declared)) throw new Error(`the action could not be declared: ${JSON.stringify(declared)}`);

    const token = signUserToken(USER_ID, 3600);
    const query = JSON.stringify({
      query: 'mutation Bench($input: BenchInput!) { benchAction(input: $input) { id title count } }',
      variables: { input: { title: 'hello' } },
    });
    const payload = JSON.stringify({
      action: { name: 'benchAction' },
      input: { input: { title: 'hello' } },
      session_variables: { 'x-gql-role': 'user', 'x-gql-user-id': USER_ID },
      request_query: 'mutation Bench',
    });
    const viaPlinth = async () => {
      const response = await request(`${plinth.url}/v1/graphql`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: query,
      });
      const body = (await response.body.json()) as { data?: { benchAction?: unknown } };
      if (!body.data?.benchAction) throw new Error(`the action failed: ${JSON.stringify(body)}`);
    };
    const direct = async () => {
      const response = await request(`${handler.url}/bench-action`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': adminSecret, 'x-gql-role': 'user', 'x-gql-user-id': USER_ID },
        body: payload,
      });
      await response.body.json();
    };
    const timed = async (run: () => Promise<void>) => {
      const start = performance.now();
      await run();
      return performance.now() - start;
    };
    for (let warm = 0; warm < 300; warm += 1) {
      await viaPlinth();
      await direct();
    }
    const plinthTimes: number[] = [];
    const directTimes: number[] = [];
    for (let call = 0; call < calls; call += 1) {
      plinthTimes.push(await timed(viaPlinth));
      directTimes.push(await timed(direct));
    }
    plinthTimes.sort((a, b) => a - b);
    directTimes.sort((a, b) => a - b);
    const row = (label: string, times: number[]) =>
      `${label.padEnd(40)} p50 ${percentile(times, 0.5).toFixed(2).padStart(7)} ms   p99 ${percentile(times, 0.99).toFixed(2).padStart(7)} ms`;
    const added50 = percentile(plinthTimes, 0.5) - percentile(directTimes, 0.5);
    const added99 = percentile(plinthTimes, 0.99) - percentile(directTimes, 0.99);
    process.stdout.write(
      [
        `${calls} sequential calls each, alternating`,
        row('baseline: the handler called directly', directTimes),
        row('the action through Plinth (GraphQL)', plinthTimes),
        `added by Plinth: p50 ${added50.toFixed(2)} ms (target: under 2 ms), p99 ${added99.toFixed(2)} ms; ratio at p50 ${(percentile(plinthTimes, 0.5) / percentile(directTimes, 0.5)).toFixed(1)}x the baseline`,
        '',
      ].join('\n'),
    );
    await metadata({ type: 'clear_metadata', args: {} });
  } finally {
    await agent.close();
    plinth.process.disconnect();
    handler.process.disconnect();
  }
}

const role = process.argv[2];
if (role === 'handler') startHandler();
else if (role === 'plinth') void startPlinth();
else if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
