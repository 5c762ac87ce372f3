import type { Queryable } from '../db/sql';
import { rows } from '../db/sql';

/*
 * What an SQL run (run_sql) renamed: tables are told apart by oid and columns by number before
 * it, so a rename is not taken for a drop. Each module holding metadata on tables follows the
 * renames in its own entries.
 */

/** A table named by schema and name, as metadata names it. */
export interface QualifiedTable {
  schema: string;
  name: string;
}

/** The key of a table in the maps below (and in the tables module's catalog). */
export const tableKey = (table: QualifiedTable) => `${table.schema}.${table.name}`;

/** A table as the catalog held it before the SQL ran: its oid and its columns by number. */
export interface TableIdentity {
  oid: string;
  table: QualifiedTable;
  columns: Record<string, string>;
}

/** The oids and column numbers of `tables` (what a rename keeps). */
export async function identities(manager: Queryable, tables: readonly QualifiedTable[]): Promise<TableIdentity[]> {
  const found = await rows<{ oid: string; schema: string; name: string; columns: Record<string, string> }>(
    manager,
    `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name,
            coalesce(json_object_agg(a.attnum, a.attname) FILTER (WHERE a.attnum > 0 AND NOT a.attisdropped), '{}') AS columns
       FROM unnest($1::text[], $2::text[]) AS wanted(schema, name)
       JOIN pg_namespace n ON n.nspname = wanted.schema
       JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = wanted.name
       LEFT JOIN pg_attribute a ON a.attrelid = c.oid
      GROUP BY c.oid, n.nspname, c.relname`,
    [tables.map((table) => table.schema), tables.map((table) => table.name)],
  );
  return found.map((row) => ({ oid: row.oid, table: { schema: row.schema, name: row.name }, columns: row.columns }));
}

/** What the SQL renamed: tables (by their old key) and, per table's old key, columns by old name; and the tables gone (by old key: dropped, or dropped and created again). */
export interface Renames {
  tables: Map<string, QualifiedTable>;
  columns: Map<string, Map<string, string>>;
  gone: Set<string>;
}

/** The renames between `before` and the same oids now (a table gone is no rename: it is dropped). */
export async function renamesSince(manager: Queryable, before: readonly TableIdentity[]): Promise<Renames> {
  const renames: Renames = { tables: new Map(), columns: new Map(), gone: new Set() };
  if (before.length === 0) return renames;
  const now = await rows<{ oid: string; schema: string; name: string; columns: Record<string, string> }>(
    manager,
    `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name,
            coalesce(json_object_agg(a.attnum, a.attname) FILTER (WHERE a.attnum > 0 AND NOT a.attisdropped), '{}') AS columns
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_attribute a ON a.attrelid = c.oid
      WHERE c.oid = ANY($1::oid[])
      GROUP BY c.oid, n.nspname, c.relname`,
    [before.map((identity) => identity.oid)],
  );
  const byOid = new Map(now.map((row) => [row.oid, row]));
  for (const identity of before) {
    const key = tableKey(identity.table);
    const current = byOid.get(identity.oid);
    if (!current) {
      renames.gone.add(key);
      continue;
    }
    if (current.schema !== identity.table.schema || current.name !== identity.table.name) {
      renames.tables.set(key, { schema: current.schema, name: current.name });
    }
    const columns = new Map<string, string>();
    for (const [number, name] of Object.entries(identity.columns)) {
      const renamed = current.columns[number];
      if (renamed !== undefined && renamed !== name) columns.set(name, renamed);
    }
    if (columns.size) renames.columns.set(key, columns);
  }
  return renames;
}
