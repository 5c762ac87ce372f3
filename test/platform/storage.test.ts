import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import sharp from 'sharp';
import type { DataSource } from 'typeorm';
import { UploadAndProcessFileDocument, FileDocument } from '../generated/graphql';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { CHUNK_BYTES, LocalStorage, PostgresStorage, type ObjectStorage } from '../../src/platform/storage';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

let database: TestDatabase;
let dataSource: DataSource;
let folder: string;

beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = createDataSource(database.url, 3);
  await dataSource.initialize();
  await runMigrations(dataSource);
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-storage-'));
});
afterAll(async () => {
  await dataSource.destroy();
  await database.drop();
  fs.rmSync(folder, { recursive: true, force: true });
});

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Pieces of uneven sizes, as a report writes them. */
async function* pieces(content: Buffer, fail = false): AsyncGenerator<Buffer> {
  let offset = 0;
  for (let size = 1; offset < content.length; size = (size * 7) % 300_001 || 1) {
    yield content.subarray(offset, offset + size);
    offset += size;
    if (fail && offset > content.length / 2) throw new Error('the writer failed');
  }
}

describe.each<[string, () => ObjectStorage]>([
  ['postgres', () => new PostgresStorage(dataSource)],
  ['local', () => new LocalStorage(folder)],
])('the %s storage driver', (_name, make) => {
  const content = randomBytes(Math.floor(CHUNK_BYTES * 2.5));

  it('writes a stream of uneven pieces and reads it back whole and as a stream', async () => {
    const storage = make();
    expect(await storage.put('test/streamed', pieces(content))).toBe(content.length);
    expect((await storage.read('test/streamed'))!.equals(content)).toBe(true);
    const opened = await storage.open('test/streamed');
    expect(opened!.size).toBe(content.length);
    expect((await bytesOf(opened!.stream)).equals(content)).toBe(true);
  });

  it('replaces an object, deletes it, and answers null for one that is not there', async () => {
    const storage = make();
    await storage.put('test/replaced', Buffer.from('first'));
    await storage.put('test/replaced', Buffer.from('second'));
    expect((await storage.read('test/replaced'))!.toString()).toBe('second');
    await storage.delete(['test/replaced']);
    expect(await storage.read('test/replaced')).toBeNull();
    expect(await storage.open('test/replaced')).toBeNull();
  });

  it('keeps an empty object', async () => {
    const storage = make();
    expect(await storage.put('test/empty', Buffer.alloc(0))).toBe(0);
    expect((await storage.read('test/empty'))!.length).toBe(0);
  });

  it('keeps nothing of a write whose source fails midway', async () => {
    const storage = make();
    await expect(storage.put('test/failed', pieces(content, true))).rejects.toThrow('the writer failed');
    expect(await storage.read('test/failed')).toBeNull();
  });

  it.each(['../escape', 'a/../b', '/absolute', 'a//b', '', 'a\u0000b', 'with space'])('refuses the key %j', async (key) => {
    await expect(make().put(key, Buffer.from('x'))).rejects.toThrow(/invalid storage key/);
  });
});

describe('the postgres driver in a transaction', () => {
  it('writes nothing when the transaction rolls back', async () => {
    const storage = new PostgresStorage(dataSource);
    await expect(
      dataSource.transaction(async (manager) => {
        await storage.put('test/rolled-back', Buffer.from('x'), { transaction: manager });
        throw new Error('the caller changed its mind');
      }),
    ).rejects.toThrow('changed its mind');
    expect(await storage.read('test/rolled-back')).toBeNull();
  });
});

describe('STORAGE_DRIVER=local behind uploadAndProcessFile', () => {
  it('keeps the upload and its thumbnail in the folder and serves them', async () => {
    const localDir = path.join(folder, 'server');
    const server = await startTestServer({ STORAGE_DRIVER: 'local', STORAGE_LOCAL_DIR: localDir, JOBS_POLL_INTERVAL_SECONDS: '1' });
    try {
      const png = await sharp({ create: { width: 50, height: 100, channels: 4, background: '#336699' } })
        .png()
        .toBuffer();
      const input = { file_name: 'local.png', file_type: 'image/png', file_size: png.length, file_data: png.toString('base64') };
      const output = (await graphql(server.graphqlUrl, UploadAndProcessFileDocument, { input }, bearer(signToken()))).body.data!.uploadAndProcessFile;
      expect(output.success).toBe(true);
      expect(fs.readFileSync(path.join(localDir, 'files', output.file_id!, 'content')).equals(png)).toBe(true);
      let file;
      for (let attempt = 0; attempt < 100; attempt++) {
        file = (await graphql(server.graphqlUrl, FileDocument, { id: output.file_id! }, { 'x-gql-admin-secret': ADMIN_SECRET })).body.data!.file;
        if (file?.status === 'COMPLETED') break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(file?.image).toMatchObject({ width: 50, height: 100, thumbnail_width: 50, thumbnail_height: 100 });
      expect(fs.existsSync(path.join(localDir, 'files', output.file_id!, 'thumbnail'))).toBe(true);
      const download = await fetch(output.file_url!.replace(/^http:\/\/localhost:\d+/, server.url));
      expect(Buffer.from(await download.arrayBuffer()).equals(png)).toBe(true);
      expect(await server.database.query('SELECT 1 FROM storage_objects')).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
