import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { MetadataError, tableEntry, type HasuraMetadata, type ModuleMetadata } from '../../src/platform/metadata';
import { directoryReader, metadataFromFiles, metadataToFiles, writeFilesUnder, yamlKeyFile } from '../../src/platform/metadata-files';
import type { PlinthModule } from '../../src/platform/module';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

/**
 * A module of this test: request type `test_add_name` (refuses a duplicate), and a section
 * holding the names under the key `test_names` and as table entries (`test_tag` on public.<name>).
 */
const namesFiles = yamlKeyFile('test_names', 'test_names.yaml');
const namesModule: PlinthModule<{ dataSource: DataSource }> = {
  name: 'test-names',
  create: async ({ dataSource }) => {
    await dataSource.query('CREATE TABLE IF NOT EXISTS test_metadata_names (name text PRIMARY KEY)');
    return { dataSource };
  },
  metadataFiles: namesFiles,
  metadata: (): ModuleMetadata => ({
    requests: {
      test_add_name: async (args, { manager }) => {
        const name = (args as { name?: unknown }).name;
        if (typeof name !== 'string' || name === '') throw new MetadataError('parse-failed', 'name must be a non-empty string', '$.args.name');
        const [{ exists }] = await manager.query('SELECT EXISTS (SELECT 1 FROM test_metadata_names WHERE name = $1) AS exists', [name]);
        if (exists) throw new MetadataError('already-exists', `the name "${name}" already exists`, '$.args.name');
        await manager.query('INSERT INTO test_metadata_names (name) VALUES ($1)', [name]);
        return { message: 'success' };
      },
    },
    section: {
      export: async (metadata, manager) => {
        const rows: { name: string }[] = await manager.query('SELECT name FROM test_metadata_names ORDER BY name');
        if (rows.length) metadata.test_names = rows.map((row) => row.name);
        for (const { name } of rows) tableEntry(metadata, { schema: 'public', name }, true).test_tag = name.toUpperCase();
      },
      replace: async (metadata, { manager }) => {
        const names = (metadata.test_names ?? []) as unknown[];
        for (const [index, name] of names.entries()) {
          if (typeof name !== 'string') throw new MetadataError('parse-failed', `test_names[${index}] must be a string`, `$.args.test_names[${index}]`);
        }
        await manager.query('DELETE FROM test_metadata_names');
        for (const name of names) await manager.query('INSERT INTO test_metadata_names (name) VALUES ($1)', [name]);
      },
    },
  }),
};

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({}, { modules: [namesModule] });
});
afterAll(async () => {
  await server.close();
});

async function metadata(body: unknown, secret: string | null = ADMIN_SECRET) {
  const response = await fetch(`${server.url}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(secret === null ? {} : { 'x-gql-admin-secret': secret }) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
const names = async () => (await server.database.query<{ name: string }>('SELECT name FROM test_metadata_names ORDER BY name')).map((row) => row.name);

describe('POST /v1/metadata', () => {
  beforeEach(async () => {
    await metadata({ type: 'clear_metadata', args: {} });
  });

  it("dispatches a module's request type and answers {message: success}", async () => {
    expect(await metadata({ type: 'test_add_name', args: { name: 'alpha' } })).toEqual({ status: 200, body: { message: 'success' } });
    expect(await names()).toEqual(['alpha']);
  });

  it("answers a module's refusal with 400 {path, error, code} and changes nothing", async () => {
    await metadata({ type: 'test_add_name', args: { name: 'alpha' } });
    expect(await metadata({ type: 'test_add_name', args: { name: 'alpha' } })).toEqual({
      status: 400,
      body: { path: '$.args.name', error: 'the name "alpha" already exists', code: 'already-exists' },
    });
    expect(await metadata({ type: 'test_add_name', args: {} })).toEqual({
      status: 400,
      body: { path: '$.args.name', error: 'name must be a non-empty string', code: 'parse-failed' },
    });
  });

  it('refuses an unknown request type, and a body without a type', async () => {
    expect(await metadata({ type: 'pg_drop_everything', args: {} })).toEqual({
      status: 400,
      body: { path: '$.type', error: 'unknown metadata request type "pg_drop_everything"', code: 'parse-failed' },
    });
    const untyped = await metadata({ args: {} });
    expect(untyped.status).toBe(400);
    expect(untyped.body).toEqual({ path: '$.type', error: expect.stringContaining('type'), code: 'parse-failed' });
    const malformed = await metadata('{"type": ');
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ path: '$', error: expect.any(String), code: 'parse-failed' });
  });

  it('answers only the admin secret: 401 access-denied without it or with a wrong one', async () => {
    for (const secret of [null, 'wrong-secret']) {
      expect(await metadata({ type: 'test_add_name', args: { name: 'sneaky' } }, secret)).toEqual({
        status: 401,
        body: { path: '$', error: expect.stringContaining('admin secret'), code: 'access-denied' },
      });
    }
    expect(await names()).toEqual([]);
  });

  it('runs a bulk in one transaction: results in order, and a refusal anywhere undoes it all, its path inside the bulk', async () => {
    const ok = await metadata({
      type: 'bulk',
      args: [
        { type: 'test_add_name', args: { name: 'a' } },
        { type: 'test_add_name', args: { name: 'b' } },
      ],
    });
    expect(ok).toEqual({ status: 200, body: [{ message: 'success' }, { message: 'success' }] });
    const refused = await metadata({
      type: 'bulk',
      args: [
        { type: 'test_add_name', args: { name: 'c' } },
        { type: 'test_add_name', args: { name: 'a' } },
      ],
    });
    expect(refused).toEqual({ status: 400, body: { path: '$.args[1].args.name', error: 'the name "a" already exists', code: 'already-exists' } });
    const unknown = await metadata({
      type: 'bulk',
      args: [
        { type: 'test_add_name', args: { name: 'd' } },
        { type: 'nope', args: {} },
      ],
    });
    expect(unknown.body).toEqual({ path: '$.args[1].type', error: 'unknown metadata request type "nope"', code: 'parse-failed' });
    expect(await names()).toEqual(['a', 'b']);
    expect((await metadata({ type: 'bulk', args: {} })).body).toEqual({ path: '$.args', error: expect.any(String), code: 'parse-failed' });
  });

  it("exports every module's section, and replace_metadata (both versions) replaces them all or nothing", async () => {
    await metadata({ type: 'test_add_name', args: { name: 'orders' } });
    const exported = (await metadata({ type: 'export_metadata', args: {} })).body as unknown as HasuraMetadata;
    expect(exported).toEqual({
      version: 3,
      sources: [
        {
          name: 'default',
          kind: 'postgres',
          tables: [{ table: { schema: 'public', name: 'orders' }, test_tag: 'ORDERS' }],
          configuration: { connection_info: { database_url: { from_env: 'DATABASE_URL' } } },
        },
      ],
      test_names: ['orders'],
    });
    expect(await metadata({ type: 'replace_metadata', args: { ...exported, test_names: ['x', 'y'] } })).toEqual({ status: 200, body: { message: 'success' } });
    expect(await names()).toEqual(['x', 'y']);
    expect(
      await metadata({ type: 'replace_metadata', version: 2, args: { allow_inconsistent_metadata: false, metadata: { ...exported, test_names: ['z'] } } }),
    ).toEqual({
      status: 200,
      body: { message: 'success' },
    });
    expect(await names()).toEqual(['z']);
    expect(await metadata({ type: 'replace_metadata', args: { ...exported, test_names: ['w', 7] } })).toEqual({
      status: 400,
      body: { path: '$.args.test_names[1]', error: 'test_names[1] must be a string', code: 'parse-failed' },
    });
    expect((await metadata({ type: 'replace_metadata', args: { version: 2, sources: [] } })).body).toEqual({
      path: '$.args.version',
      error: 'only metadata version 3 is supported',
      code: 'parse-failed',
    });
    expect(await names()).toEqual(['z']);
    expect(await metadata({ type: 'reload_metadata', args: {} })).toEqual({ status: 200, body: { message: 'success', is_consistent: true } });
  });
});

describe("the files under metadata/ (Hasura's CLI layout)", () => {
  it('write the tables under databases/ with !include, the modules their own files, and read back to the same metadata', async () => {
    await metadata({ type: 'clear_metadata', args: {} });
    await metadata({ type: 'bulk', args: ['users', 'orders'].map((name) => ({ type: 'test_add_name', args: { name } })) });
    const exported = (await metadata({ type: 'export_metadata', args: {} })).body as unknown as HasuraMetadata;
    const files = metadataToFiles(exported, [namesFiles]);
    expect(Object.keys(files).sort()).toEqual([
      'databases/databases.yaml',
      'databases/default/tables/public_orders.yaml',
      'databases/default/tables/public_users.yaml',
      'databases/default/tables/tables.yaml',
      'test_names.yaml',
      'version.yaml',
    ]);
    expect(files['databases/default/tables/tables.yaml']).toBe('- "!include public_orders.yaml"\n- "!include public_users.yaml"\n');
    expect(files['databases/databases.yaml']).toContain('tables: "!include default/tables/tables.yaml"');
    expect(files['databases/default/tables/public_users.yaml']).toBe('table:\n  schema: public\n  name: users\ntest_tag: USERS\n');

    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-metadata-'));
    try {
      writeFilesUnder(folder, files);
      expect(metadataFromFiles(directoryReader(folder), [namesFiles])).toEqual(exported);
      fs.writeFileSync(path.join(folder, 'databases', 'default', 'tables', 'tables.yaml'), '- "!include missing.yaml"\n');
      expect(() => metadataFromFiles(directoryReader(folder), [namesFiles])).toThrow('databases/default/tables/missing.yaml is included but does not exist');
      fs.writeFileSync(path.join(folder, 'databases', 'default', 'tables', 'tables.yaml'), '- "!include tables.yaml"\n');
      expect(() => metadataFromFiles(directoryReader(folder), [namesFiles])).toThrow('includes itself');
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});
