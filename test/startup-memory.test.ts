import path from 'node:path';
import type { MemoryReport } from './support/memory-report';
import { createTestDatabase, type TestDatabase } from './support/database';
import { testEnvironment } from './support/server';
import { CLI, spawnServer, type SpawnedServer } from './support/spawn';

const MEMORY_REPORT = path.join(__dirname, 'support', 'memory-report.js');

/** Packages only some requests use, required on first use rather than by every server at start. */
const ON_FIRST_USE = [
  'undici',
  'nodemailer',
  'html-to-text',
  'otplib',
  'csv-parse',
  'mjml',
  'sharp',
  'stripe',
  'qrcode',
  'pino-pretty',
  '@apollo/usage-reporting-protobuf',
];

let database: TestDatabase;
let server: SpawnedServer | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  if (server) {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  await database.drop();
});

/** Asks the server for a memory report (test/support/memory-report.ts) and waits for it. */
async function memoryReport(spawned: SpawnedServer): Promise<MemoryReport> {
  const before = spawned.output().length;
  spawned.child.kill('SIGUSR2');
  for (let attempt = 0; attempt < 100; attempt++) {
    const line = spawned
      .output()
      .slice(before)
      .split('\n')
      .find((text) => text.startsWith('{"memoryReport"'));
    if (line) return (JSON.parse(line) as { memoryReport: MemoryReport }).memoryReport;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no memory report:\n${spawned.output().slice(before)}`);
}

const GROWN_YOUNG_GENERATION = 8 * 1024 * 1024;
const SMALL_YOUNG_GENERATION = 4 * 1024 * 1024;

/** Memory reports a second apart until the young generation is small again (or 40 s passed); the last one. */
async function whenQuiet(spawned: SpawnedServer, first: MemoryReport): Promise<MemoryReport> {
  let report = first;
  for (let wait = 0; wait < 40 && report.newSpaceBytes > SMALL_YOUNG_GENERATION; wait++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    report = await memoryReport(spawned);
  }
  return report;
}

describe('a started server’s memory', () => {
  it('holds none of the packages only some requests use, and gives its young generation back once quiet', async () => {
    server = await spawnServer(testEnvironment(database.url, { PLINTH_IDLE_COLLECTION_MS: '1000' }), 60_000, {
      args: ['--require', MEMORY_REPORT, CLI, 'start'],
    });
    const started = await memoryReport(server);
    expect(started.packages).toEqual(expect.arrayContaining(['fastify', 'typeorm', '@apollo/server']));
    expect(started.packages.filter((name) => ON_FIRST_USE.includes(name))).toEqual([]);

    // Loading the modules grows the young generation to its most (two 16 MB semi-spaces); once the
    // server is quiet, its idle collections give it back (V8's smallest is 1 MB).
    expect(started.newSpaceBytes).toBeGreaterThan(GROWN_YOUNG_GENERATION);
    expect((await whenQuiet(server, started)).newSpaceBytes).toBeLessThanOrEqual(SMALL_YOUNG_GENERATION);
  }, 90_000);

  it('by default, gives back its start-up’s young generation once quiet (PLINTH_STARTUP_COLLECTION)', async () => {
    // The tests' environment turns it off; here it is left to its default.
    const { PLINTH_STARTUP_COLLECTION: _off, ...defaults } = testEnvironment(database.url);
    const started = await spawnServer(defaults, 60_000, { args: ['--require', MEMORY_REPORT, CLI, 'start'] });
    try {
      const first = await memoryReport(started);
      expect(first.newSpaceBytes).toBeGreaterThan(GROWN_YOUNG_GENERATION);
      expect((await whenQuiet(started, first)).newSpaceBytes).toBeLessThanOrEqual(SMALL_YOUNG_GENERATION);
    } finally {
      started.child.kill('SIGTERM');
      await started.exited;
    }
  }, 90_000);

  it('keeps its young generation when idle and start-up collection are off', async () => {
    const kept = await spawnServer(testEnvironment(database.url, { PLINTH_IDLE_COLLECTION_MS: '0', PLINTH_STARTUP_COLLECTION: 'false' }), 60_000, {
      args: ['--require', MEMORY_REPORT, CLI, 'start'],
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 8000));
      expect((await memoryReport(kept)).newSpaceBytes).toBeGreaterThan(GROWN_YOUNG_GENERATION);
    } finally {
      kept.child.kill('SIGTERM');
      await kept.exited;
    }
  }, 90_000);
});
