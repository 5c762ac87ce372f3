import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config';

/** What a content route is told: the bytes and how to present them, or why not. */
export type ContentAnswer =
  | { found: true; stream: Readable; size: number; contentType: string; fileName: string; inline: boolean }
  | { found: false; status: 401 | 403 | 404; code: string; message: string };

/** An object's content: all of it, or a stream of chunks written as they come. */
export type StorageContent = Buffer | AsyncIterable<Buffer>;

export interface PutOptions {
  /**
   * The PostgreSQL driver writes inside this transaction, so the object exists only if the
   * caller's change commits. The local driver writes the file at once (a folder has no
   * transaction); the caller deletes it when its change fails.
   */
  transaction?: EntityManager;
}

/**
 * Where the bytes of files and reports are kept. Keys are made by the modules: letters, digits,
 * `/`, `-`, `_` and `.`, never `..`.
 */
export interface ObjectStorage {
  readonly driver: 'postgres' | 'local';
  /** Writes (or replaces) an object and resolves with its size in bytes. */
  put(key: string, content: StorageContent, options?: PutOptions): Promise<number>;
  /** The object's content as a stream read a chunk at a time, or null when there is none. */
  open(key: string): Promise<{ size: number; stream: Readable } | null>;
  /** The whole object, for the small ones (uploads, bounded by FILES_MAX_BYTES). */
  read(key: string): Promise<Buffer | null>;
  delete(keys: string[]): Promise<void>;
}

const KEY = /^[A-Za-z0-9_-][A-Za-z0-9_./-]{0,254}$/;
/** The PostgreSQL driver's chunk: large enough for few rows, small enough to hold one in memory. */
export const CHUNK_BYTES = 1024 * 1024;

function checkKey(key: string): void {
  if (!KEY.test(key) || key.split('/').some((part) => part === '..' || part === '.' || part === '')) {
    throw new Error(`invalid storage key "${key}"`);
  }
}

/** Cuts a stream of buffers of any size into chunks of exactly `size` bytes (the last one shorter). */
async function* rechunk(content: StorageContent, size: number): AsyncGenerator<Buffer> {
  if (Buffer.isBuffer(content)) {
    for (let offset = 0; offset < content.length; offset += size) yield content.subarray(offset, offset + size);
    return;
  }
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const piece of content) {
    let rest = piece;
    while (pendingBytes + rest.length >= size) {
      const take = size - pendingBytes;
      yield Buffer.concat([...pending, rest.subarray(0, take)]);
      rest = rest.subarray(take);
      pending = [];
      pendingBytes = 0;
    }
    if (rest.length > 0) {
      pending.push(rest);
      pendingBytes += rest.length;
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending);
}

/** Objects as rows (storage_objects) and 1 MiB chunks (storage_chunks) in the project's database. */
export class PostgresStorage implements ObjectStorage {
  readonly driver = 'postgres';

  constructor(private readonly dataSource: DataSource) {}

  async put(key: string, content: StorageContent, options: PutOptions = {}): Promise<number> {
    checkKey(key);
    const write = async (manager: EntityManager) => {
      await manager.query('DELETE FROM storage_objects WHERE key = $1', [key]);
      await manager.query('INSERT INTO storage_objects (key, size) VALUES ($1, 0)', [key]);
      let size = 0;
      let seq = 0;
      for await (const chunk of rechunk(content, CHUNK_BYTES)) {
        await manager.query('INSERT INTO storage_chunks (key, seq, data) VALUES ($1, $2, $3)', [key, seq++, chunk]);
        size += chunk.length;
      }
      await manager.query('UPDATE storage_objects SET size = $2 WHERE key = $1', [key, size]);
      return size;
    };
    return options.transaction ? write(options.transaction) : this.dataSource.transaction(write);
  }

  async open(key: string): Promise<{ size: number; stream: Readable } | null> {
    checkKey(key);
    const [object] = (await this.dataSource.query('SELECT size FROM storage_objects WHERE key = $1', [key])) as { size: string }[];
    if (!object) return null;
    const { dataSource } = this;
    // One chunk per query: the stream holds no connection between reads, and at most one chunk.
    async function* chunks(): AsyncGenerator<Buffer> {
      for (let seq = 0; ; seq++) {
        const [row] = (await dataSource.query('SELECT data FROM storage_chunks WHERE key = $1 AND seq = $2', [key, seq])) as {
          data: Buffer;
        }[];
        if (!row) return;
        yield row.data;
      }
    }
    return { size: Number(object.size), stream: Readable.from(chunks(), { objectMode: false }) };
  }

  async read(key: string): Promise<Buffer | null> {
    checkKey(key);
    const rows = (await this.dataSource.query(`SELECT c.data FROM storage_objects o LEFT JOIN storage_chunks c USING (key) WHERE o.key = $1 ORDER BY c.seq`, [
      key,
    ])) as { data: Buffer | null }[];
    if (rows.length === 0) return null;
    return Buffer.concat(rows.flatMap((row) => (row.data ? [row.data] : [])));
  }

  async delete(keys: string[]): Promise<void> {
    keys.forEach(checkKey);
    if (keys.length > 0) await this.dataSource.query('DELETE FROM storage_objects WHERE key = ANY($1::text[])', [keys]);
  }
}

/** Objects as files under a folder of this machine (STORAGE_LOCAL_DIR): only this instance serves them. */
export class LocalStorage implements ObjectStorage {
  readonly driver = 'local';

  constructor(private readonly root: string) {}

  private pathOf(key: string): string {
    checkKey(key);
    return path.join(this.root, ...key.split('/'));
  }

  async put(key: string, content: StorageContent): Promise<number> {
    const target = this.pathOf(key);
    await fs.promises.mkdir(path.dirname(target), { recursive: true });
    // Written beside the target and renamed: a reader never sees half an object.
    const temporary = `${target}.${randomUUID()}.partial`;
    try {
      await pipeline(Buffer.isBuffer(content) ? Readable.from([content]) : Readable.from(content), fs.createWriteStream(temporary));
      await fs.promises.rename(temporary, target);
    } catch (error) {
      await fs.promises.rm(temporary, { force: true });
      throw error;
    }
    return (await fs.promises.stat(target)).size;
  }

  async open(key: string): Promise<{ size: number; stream: Readable } | null> {
    const target = this.pathOf(key);
    try {
      const handle = await fs.promises.open(target, 'r');
      const { size } = await handle.stat();
      return { size, stream: handle.createReadStream() };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async read(key: string): Promise<Buffer | null> {
    try {
      return await fs.promises.readFile(this.pathOf(key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async delete(keys: string[]): Promise<void> {
    await Promise.all(keys.map((key) => fs.promises.rm(this.pathOf(key), { force: true })));
  }
}

/** The driver STORAGE_DRIVER names. */
export function createStorage(config: Pick<Config, 'storage'>, dataSource: DataSource): ObjectStorage {
  return config.storage.driver === 'local' ? new LocalStorage(config.storage.localDir) : new PostgresStorage(dataSource);
}
