import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { RequestOutcomes } from '../../src/platform/request-outcomes';
import { createTestDatabase, type TestDatabase } from '../support/database';

let database: TestDatabase;
let dataSource: DataSource;

beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = createDataSource(database.url, 2);
  await dataSource.initialize();
  await runMigrations(dataSource);
});
afterAll(async () => {
  await dataSource.destroy();
  await database.drop();
});

const rows = () => database.query<{ service: string; minute: Date; good: string; bad: string }>('SELECT * FROM request_outcomes ORDER BY service, minute');

describe('RequestOutcomes', () => {
  it('writes the counts of many requests per service and minute in one statement, adding to what is stored', async () => {
    const statements: string[] = [];
    const outcomes = new RequestOutcomes(
      (sql, parameters) => {
        statements.push(sql);
        return dataSource.query(sql, parameters);
      },
      60_000,
      pino({ level: 'silent' }),
    );
    const minute = Date.parse('2030-01-01T10:00:00.000Z');
    for (let index = 0; index < 1000; index++) outcomes.record('api', index % 10 !== 0, minute + (index % 60) * 1000);
    for (let index = 0; index < 5; index++) outcomes.record('graphql', false, minute + 60_000);
    await outcomes.flush();
    expect(statements).toHaveLength(1);
    outcomes.record('api', true, minute);
    await outcomes.close();
    expect(statements).toHaveLength(2);
    expect((await rows()).map((row) => [row.service, row.minute.toISOString(), row.good, row.bad])).toEqual([
      ['api', '2030-01-01T10:00:00.000Z', '901', '100'],
      ['graphql', '2030-01-01T10:01:00.000Z', '0', '5'],
    ]);
    // Nothing counted: nothing written.
    await outcomes.flush();
    expect(statements).toHaveLength(2);
  });

  it('counts each request in its own minute when minutes interleave (a late request of the minute before)', async () => {
    const outcomes = new RequestOutcomes((sql, parameters) => dataSource.query(sql, parameters), 60_000, pino({ level: 'silent' }));
    const minute = Date.parse('2031-01-01T10:00:00.000Z');
    for (let index = 0; index < 30; index++) {
      outcomes.record('interleaved', true, minute + 59_000);
      outcomes.record('interleaved', index % 3 !== 0, minute + 60_000 + index);
    }
    outcomes.record('interleaved', false, minute + 1000);
    await outcomes.close();
    const written = (await rows()).filter((row) => row.service === 'interleaved');
    expect(written.map((row) => [row.minute.toISOString(), row.good, row.bad])).toEqual([
      ['2031-01-01T10:00:00.000Z', '30', '1'],
      ['2031-01-01T10:01:00.000Z', '20', '10'],
    ]);
  });

  it('keeps the counts of a write that failed for the next one', async () => {
    let failing = true;
    const outcomes = new RequestOutcomes(
      async (sql, parameters) => {
        if (failing) throw new Error('the database is away');
        return dataSource.query(sql, parameters);
      },
      60_000,
      pino({ level: 'silent' }),
    );
    const minute = Date.parse('2030-02-01T00:00:00.000Z');
    outcomes.record('kept', true, minute);
    outcomes.record('kept', false, minute);
    await outcomes.flush();
    outcomes.record('kept', true, minute);
    failing = false;
    await outcomes.flush();
    const kept = (await rows()).filter((row) => row.service === 'kept');
    expect(kept.map((row) => [row.good, row.bad])).toEqual([['2', '1']]);
  });
});
