import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { RegisterUserDocument } from './generated/graphql';
import { freePort } from './support/global-setup';
import pg from 'pg';
import { graphql, postGraphQL } from './support/graphql';
import { ADMIN_SECRET, JWT_SECRET } from './support/server';
import { runCli, spawnServer, type SpawnedServer } from './support/spawn';

/** No DATABASE_URL: every process here uses the embedded PostgreSQL under its data folder. */
let dataDir: string;
let environment: Record<string, string>;
const running = new Set<SpawnedServer>();

beforeAll(async () => {
  dataDir = path.resolve(__dirname, '..', '..', '.data-test', `embedded-${randomBytes(4).toString('hex')}`);
  environment = {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    PLINTH_DATA_DIR: dataDir,
    PLINTH_EMBEDDED_PG_PORT: String(await freePort()),
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    GQL_GRAPHQL_JWT_SECRET: JWT_SECRET,
  };
});
afterAll(async () => {
  for (const server of running) server.child.kill('SIGTERM');
  await Promise.all([...running].map((server) => server.exited));
  stopClusterIfRunning();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const clusterDir = () => path.join(dataDir, 'postgres');
const postmasterPid = () => path.join(clusterDir(), 'postmaster.pid');

function stopClusterIfRunning(): void {
  if (!fs.existsSync(postmasterPid())) return;
  const pid = Number(fs.readFileSync(postmasterPid(), 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    // already gone
  }
}

async function start(options: { processGroup?: boolean; env?: Record<string, string> } = {}): Promise<SpawnedServer> {
  const server = await spawnServer({ ...environment, ...options.env }, undefined, options);
  running.add(server);
  void server.exited.then(() => running.delete(server));
  return server;
}

const register = (server: SpawnedServer, email: string) =>
  graphql(`${server.url}/v1/graphql`, RegisterUserDocument, { input: { email, password: 'password123', name: 'Embedded' } });

async function until(condition: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the embedded PostgreSQL', () => {
  it('is initialised by `plinth migrate`, migrated, and stopped again when the command ends', async () => {
    const result = await runCli(['migrate'], environment);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('applied: CreateUsers1763700000000, CreatePubSubPayloads1763700000001');
    expect(fs.existsSync(path.join(clusterDir(), 'PG_VERSION'))).toBe(true);
    await until(() => !fs.existsSync(postmasterPid()));

    const again = await runCli(['migrate'], environment);
    expect(again.stdout).toContain('the database is up to date');
  });

  it('keeps its folder owned by the user it runs as: the postgres system user when started as root', () => {
    const expectedOwner = process.getuid!() === 0 ? Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()) : process.getuid!();
    expect(fs.statSync(clusterDir()).uid).toBe(expectedOwner);
  });

  it('keeps acknowledged data across a crash: the orphaned cluster is stopped and restarted', async () => {
    const first = await start();
    expect((await register(first, 'survivor@example.com')).body.data!.registerUser.success).toBe(true);

    first.child.kill('SIGKILL');
    await first.exited;
    // PostgreSQL outlives the killed server process: its pid file is still there.
    expect(fs.existsSync(postmasterPid())).toBe(true);

    const second = await start();
    expect(second.output()).toContain('stopping an embedded PostgreSQL left running by a previous process');
    const again = await register(second, 'SURVIVOR@example.com');
    expect(again.body.data!.registerUser.errors).toEqual([expect.objectContaining({ field: 'email', code: 'ALREADY_EXISTS' })]);

    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    // A clean shutdown stops the cluster too.
    await until(() => !fs.existsSync(postmasterPid()));
  });

  it('says which setting to change when its port is taken, and leaves nothing running', async () => {
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((squatter.address() as net.AddressInfo).port);
      const result = await runCli(['migrate'], { ...environment, PLINTH_EMBEDDED_PG_PORT: port });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`did not start on 127.0.0.1:${port}`);
      expect(result.stderr).toContain('PLINTH_EMBEDDED_PG_PORT');
      expect(fs.existsSync(postmasterPid())).toBe(false);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it('is not shared: a second process on the same data folder refuses to start, the first goes on', async () => {
    const owner = await start();
    await expect(spawnServer(environment)).rejects.toThrow(/in use by another process \(pid \d+\)/);
    expect((await register(owner, 'still-serving@example.com')).body.data!.registerUser.success).toBe(true);
    owner.child.kill('SIGTERM');
    expect((await owner.exited).code).toBe(0);
  });

  /** Lines at warn level or above, and any stack trace, in a spawned server's output. */
  const problemsIn = (output: string) => [
    ...output.split('\n').filter((line) => line.startsWith('{') && (JSON.parse(line) as { level: number }).level >= 40),
    ...(/\n\s+at \S+|"stack"|\\n\s+at /.test(output) ? ['a stack trace'] : []),
  ];

  /** Runs one statement on the cluster's `plinth` database, as its postgres user. */
  async function onCluster<T>(sql: string, parameters: unknown[] = []): Promise<T[]> {
    const password = fs.readFileSync(path.join(dataDir, 'postgres-password'), 'utf8').trim();
    const client = new pg.Client({ host: '127.0.0.1', port: Number(environment.PLINTH_EMBEDDED_PG_PORT), user: 'postgres', password, database: 'plinth' });
    await client.connect();
    try {
      return (await client.query(sql, parameters)).rows as T[];
    } finally {
      await client.end();
    }
  }

  it('stops on Ctrl-C without an error or a stack trace, having written the last request outcomes before the database stopped', async () => {
    // No periodic write: only the one at shutdown can store the counts.
    const server = await start({ processGroup: true, env: { PLINTH_REQUEST_OUTCOMES_FLUSH_MS: '600000' } });
    const graphqlOutcomes = () =>
      onCluster<{ good: number; bad: number }>(
        "SELECT coalesce(sum(good), 0)::int AS good, coalesce(sum(bad), 0)::int AS bad FROM request_outcomes WHERE service = 'graphql'",
      );
    // The requests earlier tests' servers counted.
    const [before] = await graphqlOutcomes();
    expect((await register(server, 'ctrl-c@example.com')).body.data!.registerUser.success).toBe(true);
    for (let index = 0; index < 4; index++) expect((await postGraphQL(`${server.url}/v1/graphql`, { query: '{ __typename }' })).status).toBe(200);
    // The terminal sends SIGINT to the whole group: the server and its children, not the embedded
    // PostgreSQL, which Plinth stops last.
    process.kill(-server.child.pid!, 'SIGINT');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(problemsIn(server.output())).toEqual([]);
    await until(() => !fs.existsSync(postmasterPid()));

    const again = await start();
    try {
      expect(await graphqlOutcomes()).toEqual([{ good: before.good + 5, bad: before.bad }]);
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
  });

  it('logs the counts it could not write as information, without a stack trace, when the database stops first (an external one, or one a process manager stops too)', async () => {
    const server = await start({ processGroup: true, env: { PLINTH_REQUEST_OUTCOMES_FLUSH_MS: '600000' } });
    expect((await postGraphQL(`${server.url}/v1/graphql`, { query: '{ __typename }' })).status).toBe(200);
    // PostgreSQL's fast shutdown ends the server's sessions before the server's own shutdown writes.
    process.kill(Number(fs.readFileSync(postmasterPid(), 'utf8').split('\n')[0]), 'SIGINT');
    await until(() => !fs.existsSync(postmasterPid()));
    process.kill(-server.child.pid!, 'SIGINT');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    const outcomeLines = server
      .output()
      .split('\n')
      .filter((line) => line.includes('"component":"request-outcomes"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(outcomeLines).toEqual([
      expect.objectContaining({ level: 30, msg: 'request outcomes not written at shutdown', counts: 1, reason: expect.any(String) }),
    ]);
    expect(JSON.stringify(outcomeLines)).not.toContain('stack');
  });
});
