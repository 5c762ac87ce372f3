import pg from 'pg';
import { DataSource, QueryFailedError } from 'typeorm';
import { isDatabaseUnavailable } from '../../src/db/unavailable';
import { createTestDatabase, type TestDatabase } from '../support/database';

/**
 * isDatabaseUnavailable on the errors the real driver and TypeORM raise: the ones that mean
 * "try again later" (503) against the ones that are the request's or the code's (never 503).
 */
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database.drop();
});

/** What `work` rejects with (it must reject). */
async function rejection(work: () => Promise<unknown>): Promise<unknown> {
  try {
    await work();
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

async function connected(url = database.url): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

describe('errors that mean the database cannot be used right now', () => {
  it('a refused connection (nothing listens)', async () => {
    const error = await rejection(() => connected('postgres://postgres@127.0.0.1:1/postgres'));
    expect((error as { code?: string }).code).toBe('ECONNREFUSED');
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it('a database that is gone (FATAL at connect)', async () => {
    const url = new URL(database.url);
    url.pathname = '/plinth_no_such_database';
    const error = await rejection(() => connected(url.toString()));
    expect((error as { code?: string }).code).toBe('3D000');
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it('a session the server terminated, raw and as TypeORM wraps it', async () => {
    const victim = await connected();
    victim.on('error', () => undefined);
    const [{ pid }] = (await victim.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[];
    await database.query('SELECT pg_terminate_backend($1)', [pid]);
    const error = await rejection(() => victim.query('SELECT 1'));
    expect(isDatabaseUnavailable(error)).toBe(true);
    expect(isDatabaseUnavailable(new QueryFailedError('SELECT 1', [], error as Error))).toBe(true);
    await victim.end().catch(() => undefined);
  });

  it('a pool that was ended', async () => {
    const pool = new pg.Pool({ connectionString: database.url });
    await pool.end();
    expect(isDatabaseUnavailable(await rejection(() => pool.query('SELECT 1')))).toBe(true);
  });
});

describe('errors that are the request’s or the code’s', () => {
  let dataSource: DataSource;
  beforeAll(async () => {
    dataSource = new DataSource({ type: 'postgres', url: database.url });
    await dataSource.initialize();
    await dataSource.query('CREATE TABLE IF NOT EXISTS unavailable_probe (id int PRIMARY KEY)');
    await dataSource.query('INSERT INTO unavailable_probe VALUES (1) ON CONFLICT DO NOTHING');
  });
  afterAll(async () => {
    await dataSource.destroy();
  });

  it.each([
    ['a syntax error', 'SELEC 1', '42601'],
    ['a unique violation', 'INSERT INTO unavailable_probe VALUES (1)', '23505'],
    ['a missing table', 'SELECT * FROM no_such_table', '42P01'],
    ['a bad value', "SELECT 'x'::int", '22P02'],
  ])('%s (through TypeORM)', async (_name, sql, code) => {
    const error = await rejection(() => dataSource.query(sql));
    expect(error).toBeInstanceOf(QueryFailedError);
    expect((error as { code?: string }).code).toBe(code);
    expect(isDatabaseUnavailable(error)).toBe(false);
  });

  it('anything that is not a database error', () => {
    for (const error of [new Error('boom'), new TypeError('x is undefined'), 'text', null, undefined, 42, { code: 42 }]) {
      expect(isDatabaseUnavailable(error)).toBe(false);
    }
  });
});
