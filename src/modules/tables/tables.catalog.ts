import type { Queryable } from '../../db/sql';
import { rows } from '../../db/sql';
import { tableKey } from '../../platform/sql-renames';
import type { QualifiedTable } from './tables.metadata';

/** A column as pg_catalog describes it. */
export interface CatalogColumn {
  name: string;
  /** The type's name in pg_type (`int4`, `timestamptz`, `_text` for an array of text). */
  typeName: string;
  /**
   * The type as SQL writes it, without modifiers (`integer`, `character varying`): the cast of a
   * bound value. `character` and `bit` without a length mean one character or bit, so a value cast
   * to them is cut short: theirs are the unbounded `bpchar` and `bit varying`, which compare alike.
   */
  sqlType: string;
  /** An array's element type name in pg_type (`text` for `text[]`), absent for any other type. */
  elementTypeName?: string;
  nullable: boolean;
}

/** A foreign key of a table: its columns and the columns they reference, in order. */
export interface CatalogForeignKey {
  columns: string[];
  references: QualifiedTable;
  referencedColumns: string[];
}

/** A primary key or unique constraint: what an upsert's `on_conflict` names. */
export interface CatalogUniqueConstraint {
  name: string;
  columns: string[];
}

export interface CatalogTable {
  table: QualifiedTable;
  /** A table, partitioned table or materialized view, whose row versions carry the inserting transaction (`xmin`); not a view or foreign table. */
  rowVersions: boolean;
  columns: CatalogColumn[];
  primaryKey: string[];
  foreignKeys: CatalogForeignKey[];
  uniqueConstraints: CatalogUniqueConstraint[];
}

/**
 * The definitions of `tables` (tables, views, materialized views and foreign tables) read from
 * pg_catalog in three statements; a table that does not exist is absent from the answer.
 */
export async function readCatalog(db: Queryable, tables: readonly QualifiedTable[]): Promise<Map<string, CatalogTable>> {
  const found = new Map<string, CatalogTable>();
  const wanted = [...new Map(tables.map((table) => [tableKey(table), table])).values()];
  if (wanted.length === 0) return found;
  const schemas = wanted.map((table) => table.schema);
  const names = wanted.map((table) => table.name);
  const columns = await rows<{
    schema: string;
    table: string;
    name: string;
    type_name: string;
    element_type_name: string | null;
    sql_type: string;
    nullable: boolean;
    row_versions: boolean;
  }>(
    db,
    // An array type is its element type's typarray (int2vector and point have a typelem too, and are not arrays).
    `SELECT n.nspname AS schema, c.relname AS table, a.attname AS name, t.typname AS type_name, e.typname AS element_type_name,
            CASE coalesce(e.typname, t.typname) WHEN 'bpchar' THEN 'bpchar' WHEN 'bit' THEN 'bit varying' ELSE format_type(coalesce(e.oid, t.oid), NULL) END
              || CASE WHEN e.oid IS NULL THEN '' ELSE '[]' END AS sql_type,
            NOT a.attnotnull AS nullable, c.relkind IN ('r', 'p', 'm') AS row_versions
       FROM unnest($1::text[], $2::text[]) AS wanted(schema, name)
       JOIN pg_namespace n ON n.nspname = wanted.schema
       JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = wanted.name AND c.relkind IN ('r', 'v', 'm', 'f', 'p')
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       JOIN pg_type t ON t.oid = a.atttypid
       LEFT JOIN pg_type e ON e.oid = t.typelem AND e.typarray = t.oid
      ORDER BY n.nspname, c.relname, a.attnum`,
    [schemas, names],
  );
  for (const column of columns) {
    const key = tableKey({ schema: column.schema, name: column.table });
    let table = found.get(key);
    if (!table)
      found.set(
        key,
        (table = {
          table: { schema: column.schema, name: column.table },
          rowVersions: column.row_versions,
          columns: [],
          primaryKey: [],
          foreignKeys: [],
          uniqueConstraints: [],
        }),
      );
    table.columns.push({
      name: column.name,
      typeName: column.type_name,
      sqlType: column.sql_type,
      ...(column.element_type_name === null ? {} : { elementTypeName: column.element_type_name }),
      nullable: column.nullable,
    });
  }
  const constraints = await rows<{
    schema: string;
    table: string;
    kind: 'p' | 'f' | 'u';
    name: string;
    columns: string[];
    ref_schema: string | null;
    ref_table: string | null;
    ref_columns: string[] | null;
  }>(
    db,
    `SELECT n.nspname AS schema, c.relname AS table, k.contype AS kind, k.conname::text AS name,
            ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS key(attnum, position)
                    JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = key.attnum ORDER BY key.position) AS columns,
            rn.nspname AS ref_schema, rc.relname AS ref_table,
            CASE WHEN k.contype = 'f' THEN ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY AS key(attnum, position)
                    JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = key.attnum ORDER BY key.position) END AS ref_columns
       FROM unnest($1::text[], $2::text[]) AS wanted(schema, name)
       JOIN pg_namespace n ON n.nspname = wanted.schema
       JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = wanted.name
       JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype IN ('p', 'f', 'u')
       LEFT JOIN pg_class rc ON rc.oid = k.confrelid
       LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
      ORDER BY k.conname`,
    [schemas, names],
  );
  for (const constraint of constraints) {
    const table = found.get(tableKey({ schema: constraint.schema, name: constraint.table }));
    if (!table) continue;
    if (constraint.kind !== 'f') table.uniqueConstraints.push({ name: constraint.name, columns: constraint.columns });
    if (constraint.kind === 'p') table.primaryKey = constraint.columns;
    else if (constraint.kind === 'f')
      table.foreignKeys.push({
        columns: constraint.columns,
        references: { schema: constraint.ref_schema!, name: constraint.ref_table! },
        referencedColumns: constraint.ref_columns!,
      });
  }
  return found;
}

export { tableKey };
