import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { MODULES } from '../../src/modules';
import type { AnyModule } from '../../src/platform/module';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { eventually } from '../support/job-recorder';
import { startTestServer } from '../support/server';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
  const dataSource = createDataSource(database.url, 4);
  await dataSource.initialize();
  await runMigrations(dataSource);
  await dataSource.destroy();
  await database.query('CREATE TABLE test_ticks (label text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())');
});
afterAll(async () => {
  await database.drop();
});

/** A module whose one recurring task records each run with the process's label. */
function tickingModule(label: string): AnyModule {
  return {
    name: 'test-ticking',
    create: ({ dataSource }) => ({ dataSource }),
    recurring: ({ dataSource }: { dataSource: DataSource }) => [
      {
        name: 'tick',
        schedule: { everyMs: 300 },
        firstRunInMs: async () => 0,
        run: () => dataSource.query('INSERT INTO test_ticks (label) VALUES ($1)', [label]),
      },
    ],
  };
}

const ticks = async (label: string) => (await database.query<{ n: number }>('SELECT count(*)::int AS n FROM test_ticks WHERE label = $1', [label]))[0].n;

describe('recurring work declared by modules', () => {
  it('no module starts a timer in create: loops start in work, recurring tasks in the worker role', async () => {
    const modulesDir = `${path.sep}src${path.sep}modules${path.sep}`;
    const startedIn: Record<string, string[]> = {};
    // Each module's create runs with the timer functions watched: a timer whose caller is a
    // module's own code is a loop started in create.
    const creates = MODULES.map((module) => module.create);
    for (const module of MODULES) {
      const create = module.create;
      module.create = async (platform, services) => {
        const { setInterval: interval, setTimeout: timeout } = globalThis;
        const note = () => {
          const caller = new Error().stack!.split('\n')[3] ?? '';
          if (caller.includes(modulesDir)) (startedIn[module.name] ??= []).push(caller.trim());
        };
        globalThis.setInterval = ((...args: Parameters<typeof setInterval>) => (note(), interval(...args))) as typeof setInterval;
        globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => (note(), timeout(...args))) as typeof setTimeout;
        try {
          return await create(platform, services);
        } finally {
          globalThis.setInterval = interval;
          globalThis.setTimeout = timeout;
        }
      };
    }
    let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
    try {
      server = await startTestServer({}, { database });
    } finally {
      for (const [index, module] of MODULES.entries()) module.create = creates[index];
    }
    try {
      expect(startedIn).toEqual({});
      // The loops and tasks are running all the same: the tasks' rows are there, named by module.
      const names = (await database.query<{ name: string }>('SELECT name FROM recurring_tasks ORDER BY name')).map((row) => row.name);
      expect(names).toEqual(
        expect.arrayContaining(['auth.expired-sessions', 'errortracking.maintenance', 'events.cleanup', 'events.scheduled-events', 'pubsub.payload-cleanup']),
      );
    } finally {
      await server.close();
    }
  });

  it("runs modules' recurring tasks only in processes with the worker role, and stops them at shutdown", async () => {
    const api = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' }, { database, modules: [tickingModule('api')] });
    try {
      await sleep(1_200);
      expect(await ticks('api')).toBe(0);
      expect(await database.query("SELECT name FROM recurring_tasks WHERE name = 'test-ticking.tick'")).toEqual([]);

      const worker = await startTestServer({ PLINTH_PROCESS_ROLES: 'worker' }, { database, modules: [tickingModule('worker')] });
      await eventually(async () => (await ticks('worker')) >= 2, 10_000, 'the worker running the task');
      await worker.close();
      const atClose = await ticks('worker');
      await sleep(1_000);
      expect(await ticks('worker')).toBe(atClose);
      expect(await ticks('api')).toBe(0);
    } finally {
      await api.close();
    }
  });

  it("keeps a module's schedule across restarts: the auth sweep runs though no process lives a whole interval", async () => {
    const settings = { AUTH_CLEANUP_INTERVAL_SECONDS: '6' };
    await database.query(
      `INSERT INTO auth_oauth_states (state_hash, provider, code_verifier, redirect_to, expires_at)
       VALUES ('\\x01', 'github', 'verifier', 'https://example.com/', now() - interval '1 minute')`,
    );
    const expiredLeft = async () => (await database.query("SELECT 1 FROM auth_oauth_states WHERE state_hash = '\\x01'")).length > 0;
    const firstStart = Date.now();
    let restarts = 0;
    // Each process lives a second once ready, well within the 6 s interval.
    while ((await expiredLeft()) && Date.now() - firstStart < 30_000) {
      const server = await startTestServer(settings, { database });
      await sleep(1_000);
      await server.close();
      restarts += 1;
    }
    expect(await expiredLeft()).toBe(false);
    expect(restarts).toBeGreaterThan(1);
  });
});
