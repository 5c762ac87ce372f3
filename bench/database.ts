import pg from 'pg';

/** Where the benchmarks run when neither BENCH_DATABASE_URL nor DATABASE_URL is set. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/plinth_bench';

/** The URL without its password, for messages. */
function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}

async function ping(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The database Plinth runs on: BENCH_DATABASE_URL or DATABASE_URL as given, otherwise
 * plinth_bench on the local PostgreSQL, created when missing. Plinth migrates it on start.
 */
export async function prepareDatabase(): Promise<string> {
  const given = process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL;
  const url = given ?? DEFAULT_DATABASE_URL;
  return given ? (await reach(url), url) : ensureDatabase(url);
}

async function reach(url: string): Promise<void> {
  try {
    await ping(url);
  } catch (error) {
    throw new Error(
      `Cannot reach PostgreSQL at ${displayUrl(url)}: ${(error as Error).message}\n` +
        'Set BENCH_DATABASE_URL (or DATABASE_URL) to a database the benchmark may migrate and use.',
    );
  }
}

/** `url`, its database created on its server when missing. */
export async function ensureDatabase(url: string): Promise<string> {
  try {
    await ping(url);
    return url;
  } catch (error) {
    if ((error as { code?: string }).code !== '3D000') await reach(url);
  }
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(new URL(url).pathname.slice(1))}`);
  } catch (error) {
    if ((error as { code?: string }).code !== '42P04') {
      throw new Error(`Cannot create the benchmark database ${displayUrl(url)}: ${(error as Error).message}`);
    }
  } finally {
    await client.end().catch(() => undefined);
  }
  await reach(url);
  return url;
}
