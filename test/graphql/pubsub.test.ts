import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { PostgresPubSub } from '../../src/platform/pubsub';
import { createTestDatabase, type TestDatabase } from '../support/database';

let database: TestDatabase;
let dataSource: DataSource;
const opened: PostgresPubSub[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = createDataSource(database.url, 4);
  await dataSource.initialize();
  await runMigrations(dataSource);
});
afterAll(async () => {
  await Promise.all(opened.map((pubSub) => pubSub.close()));
  await dataSource.destroy();
  await database.drop();
});

/** One "instance": its own LISTEN connection, as each server process has. */
async function instance(): Promise<PostgresPubSub> {
  const pubSub = new PostgresPubSub({
    url: database.url,
    query: (sql, parameters) => dataSource.query(sql, parameters),
    logger: pino({ level: 'silent' }),
    shutdown: new AbortController().signal,
  });
  await pubSub.start();
  opened.push(pubSub);
  return pubSub;
}

/** Collects what a subscription yields; `take(n)` waits for n items. */
function collect(iterable: AsyncIterable<unknown>) {
  const items: unknown[] = [];
  const iterator = iterable[Symbol.asyncIterator]();
  let pump = (async () => {
    for (;;) {
      const next = await iterator.next();
      if (next.done) return;
      items.push(next.value);
    }
  })();
  return {
    items,
    async take(count: number, timeoutMs = 5000): Promise<unknown[]> {
      const deadline = Date.now() + timeoutMs;
      while (items.length < count) {
        if (Date.now() > deadline) throw new Error(`received ${items.length} of ${count} events`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return items.slice(0, count);
    },
    async stop() {
      await iterator.return?.();
      await pump;
      pump = Promise.resolve();
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

describe('PostgresPubSub', () => {
  it('delivers an event published on one instance to subscribers on every instance', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    const onA = collect(a.subscribe('GREETING'));
    const onB = collect(b.subscribe('GREETING'));

    a.publish('GREETING', { text: 'hello' });

    expect(await onA.take(1)).toEqual([{ text: 'hello' }]);
    expect(await onB.take(1)).toEqual([{ text: 'hello' }]);
    await Promise.all([onA.stop(), onB.stop()]);
  });

  it('keeps topics apart, topic ids included', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    const forJob1 = collect(b.subscribe('JOB_STATUS', 'job-1'));
    const other = collect(b.subscribe('OTHER'));

    a.publish('JOB_STATUS', 'job-2', { status: 'running' });
    a.publish('JOB_STATUS', 'job-1', { status: 'done' });

    expect(await forJob1.take(1)).toEqual([{ status: 'done' }]);
    await settle();
    expect(forJob1.items).toHaveLength(1);
    expect(other.items).toHaveLength(0);
    await Promise.all([forJob1.stop(), other.stop()]);
  });

  it('carries payloads larger than a NOTIFY allows (8000 bytes) and keeps publication order', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    const received = collect(b.subscribe('BIG'));
    const big = { blob: 'x'.repeat(50_000), unicode: 'é'.repeat(5000) };

    a.publish('BIG', { n: 1 });
    a.publish('BIG', big);
    a.publish('BIG', { n: 3 });

    expect(await received.take(3)).toEqual([{ n: 1 }, big, { n: 3 }]);
    const [stored] = await database.query<{ count: string }>('SELECT count(*) FROM pubsub_payloads');
    expect(Number(stored.count)).toBeGreaterThanOrEqual(1);
    await received.stop();
  });

  it('stops delivering to a subscriber that has gone', async () => {
    const a = await instance();
    const gone = collect(a.subscribe('BYE'));
    const staying = collect(a.subscribe('BYE'));
    await gone.stop();

    a.publish('BYE', 1);

    expect(await staying.take(1)).toEqual([1]);
    expect(gone.items).toEqual([]);
    await staying.stop();
  });

  it('listens again after its database connection is killed', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    const received = collect(b.subscribe('AFTER_OUTAGE'));

    await database.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plinth-pubsub' AND datname = current_database()");
    // Reconnection starts after 250 ms; publish until the new listeners hear it.
    const deadline = Date.now() + 10_000;
    while (received.items.length === 0 && Date.now() < deadline) {
      a.publish('AFTER_OUTAGE', 'back');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(received.items[0]).toBe('back');
    await received.stop();
  });
});
