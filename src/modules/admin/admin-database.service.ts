import type { DataSource } from 'typeorm';
import { runMigrations } from '../../db/data-source';
import { one, rows } from '../../db/sql';
import { DEFAULT_SOURCE, type HasuraMetadata } from '../../platform/metadata';

export interface MigrationStatus {
  name: string;
  /** The migration's timestamp (from its name), in milliseconds. */
  timestamp: number;
  status: 'applied' | 'pending';
  /** When it was applied: recorded since migration MigrationAppliedAt, or PostgreSQL's commit time (track_commit_timestamp); null otherwise. */
  appliedAt: string | null;
  /** Applied, but not among this version's migrations (applied by a newer Plinth, or renamed). */
  unknownToThisVersion: boolean;
}

export interface SchemaColumn {
  name: string;
  type: string;
  nullable: boolean;
  default: string | null;
}

export interface SchemaIndex {
  name: string;
  definition: string;
  unique: boolean;
  primary: boolean;
}

export interface SchemaTable {
  schema: string;
  name: string;
  kind: 'table' | 'partitioned table' | 'view' | 'materialized view' | 'foreign table';
  /** PostgreSQL's estimate (reltuples); null before the table was first analysed. */
  rowEstimate: number | null;
  totalBytes: number;
  primaryKey: string[];
  columns: SchemaColumn[];
  indexes: SchemaIndex[];
  /** Tracked by the generated GraphQL API (the tables module's metadata). */
  tracked: boolean;
}

/** What the schema page needs of the tables module: its tracked tables, as it exports them. */
export interface TrackedTablesSource {
  exportTo(metadata: HasuraMetadata, manager: DataSource['manager']): Promise<void>;
}

const KINDS: Record<string, SchemaTable['kind']> = { r: 'table', p: 'partitioned table', v: 'view', m: 'materialized view', f: 'foreign table' };
const SYSTEM_SCHEMAS = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'`;
const RELATIONS = `c.relkind IN ('r', 'p', 'v', 'm', 'f') AND ${SYSTEM_SCHEMAS}`;

/** The database's migrations (TypeORM's, in migrations/) and its schema, as the dashboard shows them. */
export class DatabaseInsight {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tracked: TrackedTablesSource,
    private readonly migrationsTable: string,
  ) {}

  async migrations(): Promise<MigrationStatus[]> {
    const table = (await one<{ exists: boolean }>(this.dataSource, 'SELECT to_regclass($1) IS NOT NULL AS exists', [this.migrationsTable]))!.exists;
    const commitTimes = table && (await one<{ on: boolean }>(this.dataSource, "SELECT current_setting('track_commit_timestamp') = 'on' AS on"))!.on;
    // applied_at (migrations/…-MigrationAppliedAt) when the table has it, else the commit time when PostgreSQL keeps them.
    const recorded = "(to_jsonb(m) ->> 'applied_at')::timestamptz";
    const applied = table
      ? await rows<{ name: string; timestamp: string; applied_at: Date | null }>(
          this.dataSource,
          `SELECT name, timestamp::text, ${commitTimes ? `COALESCE(${recorded}, pg_xact_commit_timestamp(m.xmin))` : recorded} AS applied_at
             FROM ${this.dataSource.driver.escape(this.migrationsTable)} m`,
        )
      : [];
    const byName = new Map(applied.map((row) => [row.name, row]));
    const known = this.dataSource.migrations.map((migration) => {
      const name = migration.name ?? migration.constructor.name;
      const row = byName.get(name);
      byName.delete(name);
      return {
        name,
        timestamp: Number(/\d{13}$/.exec(name)?.[0] ?? row?.timestamp ?? 0),
        status: row ? 'applied' : 'pending',
        appliedAt: row?.applied_at ? new Date(row.applied_at).toISOString() : null,
        unknownToThisVersion: false,
      } satisfies MigrationStatus;
    });
    const unknown = [...byName.values()].map((row): MigrationStatus => ({
      name: row.name,
      timestamp: Number(row.timestamp),
      status: 'applied',
      appliedAt: row.applied_at ? new Date(row.applied_at).toISOString() : null,
      unknownToThisVersion: true,
    }));
    return [...known, ...unknown].sort((a, b) => a.timestamp - b.timestamp || a.name.localeCompare(b.name));
  }

  /** Runs the pending migrations under start-up's migration lock; the names of those that ran. */
  async runPending(): Promise<{ ran: string[]; migrations: MigrationStatus[] }> {
    const ran = await runMigrations(this.dataSource);
    return { ran, migrations: await this.migrations() };
  }

  async schema(): Promise<{ tables: SchemaTable[] }> {
    const metadata: HasuraMetadata = { version: 3, sources: [{ name: DEFAULT_SOURCE, kind: 'postgres', tables: [] }] };
    // A database restored from before the tables module's migration has no metadata yet: nothing is tracked.
    const hasMetadata = (await one<{ exists: boolean }>(this.dataSource, "SELECT to_regclass('tables_metadata') IS NOT NULL AS exists"))!.exists;
    if (hasMetadata) await this.tracked.exportTo(metadata, this.dataSource.manager);
    const trackedKeys = new Set(
      metadata.sources[0].tables.filter((entry) => entry.configuration !== undefined).map((entry) => `${entry.table.schema}.${entry.table.name}`),
    );
    const [relations, columns, indexes] = await Promise.all([
      rows<{ oid: string; schema: string; name: string; relkind: string; row_estimate: string | null; total_bytes: string }>(
        this.dataSource,
        `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS relkind,
                CASE WHEN c.reltuples < 0 THEN NULL ELSE c.reltuples::bigint END AS row_estimate,
                pg_total_relation_size(c.oid) AS total_bytes
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE ${RELATIONS}
          ORDER BY n.nspname, c.relname`,
      ),
      rows<{ oid: string; name: string; type: string; nullable: boolean; default: string | null }>(
        this.dataSource,
        `SELECT a.attrelid::text AS oid, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, NOT a.attnotnull AS nullable,
                pg_get_expr(d.adbin, d.adrelid) AS default
           FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE ${RELATIONS} AND a.attnum > 0 AND NOT a.attisdropped
          ORDER BY a.attrelid, a.attnum`,
      ),
      rows<{ oid: string; name: string; definition: string; unique: boolean; primary: boolean; columns: string[] | null }>(
        this.dataSource,
        `SELECT i.indrelid::text AS oid, ic.relname AS name, pg_get_indexdef(i.indexrelid) AS definition, i.indisunique AS unique,
                i.indisprimary AS primary,
                (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum) AS columns
           FROM pg_index i
           JOIN pg_class ic ON ic.oid = i.indexrelid
           JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE ${RELATIONS}
          ORDER BY i.indrelid, ic.relname`,
      ),
    ]);
    const columnsOf = groupBy(columns, (column) => column.oid);
    const indexesOf = groupBy(indexes, (index) => index.oid);
    return {
      tables: relations.map((relation) => {
        const tableIndexes = indexesOf.get(relation.oid) ?? [];
        return {
          schema: relation.schema,
          name: relation.name,
          kind: KINDS[relation.relkind],
          rowEstimate: relation.row_estimate === null ? null : Number(relation.row_estimate),
          totalBytes: Number(relation.total_bytes),
          primaryKey: tableIndexes.find((index) => index.primary)?.columns ?? [],
          columns: (columnsOf.get(relation.oid) ?? []).map(({ name, type, nullable, default: fallback }) => ({ name, type, nullable, default: fallback })),
          indexes: tableIndexes.map(({ name, definition, unique, primary }) => ({ name, definition, unique, primary })),
          tracked: trackedKeys.has(`${relation.schema}.${relation.name}`),
        };
      }),
    };
  }
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(key(item));
    if (group) group.push(item);
    else groups.set(key(item), [item]);
  }
  return groups;
}
