import type { TableModel } from '../tables/tables.model';

/** A column of a tracked table, as the data browser shows, filters, sorts and edits it. */
export interface BrowsedColumn {
  name: string;
  /** Its GraphQL field name. */
  field: string;
  /** Its GraphQL scalar (`Int`, `String`, `timestamptz`, ...). */
  scalar: string;
  array: boolean;
  sqlType: string;
  nullable: boolean;
  primaryKey: boolean;
}

/** A tracked table, with the generated names the data browser's GraphQL documents use. */
export interface BrowsedTable {
  schema: string;
  name: string;
  /** `schema.name`: the table's path in the data browser (/data/<key>). */
  key: string;
  typeName: string;
  roots: { select: string; selectAggregate: string; selectByPk: string | null; updateByPk: string | null };
  columns: BrowsedColumn[];
}

/**
 * The data browser's view of the tracked tables the served schema has (the tables module's
 * metadata, reached through its services): rows are read and changed through the generated API
 * (POST /api/data/graphql), never here.
 */
export class AdminData {
  constructor(
    private readonly servedTables: () => readonly TableModel[],
    /** Whether the served schema (the admin's view) has this mutation root field. */
    private readonly hasMutation: (field: string) => boolean,
  ) {}

  tables(): BrowsedTable[] {
    return this.servedTables()
      .map((table): BrowsedTable => {
        const keys = new Set(table.primaryKey.map((column) => column.name));
        const hasKey = keys.size > 0;
        return {
          schema: table.table.schema,
          name: table.table.name,
          key: `${table.table.schema}.${table.table.name}`,
          typeName: table.typeName,
          roots: {
            select: table.roots.select,
            selectAggregate: table.roots.selectAggregate,
            selectByPk: hasKey ? table.roots.selectByPk : null,
            updateByPk: hasKey && this.hasMutation(table.mutationRoots.updateByPk) ? table.mutationRoots.updateByPk : null,
          },
          columns: table.columns.map((column) => ({
            name: column.name,
            field: column.field,
            scalar: column.scalar,
            array: column.array,
            sqlType: column.sqlType,
            nullable: column.nullable,
            primaryKey: keys.has(column.name),
          })),
        };
      })
      .sort((a, b) => a.key.localeCompare(b.key));
  }
}
