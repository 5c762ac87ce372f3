import type { ColumnModel, RelationshipModel, RootKind, TableModel } from './tables.model';

/** What a schema shows of a tracked table: all of it (the admin's), or what a role's select permission opens. */
export interface TableView {
  table: TableModel;
  columns: ColumnModel[];
  /** Relationships to tables of the same schema; `aggregate`: an array relationship's `<name>_aggregate` is shown. */
  relationships: { relationship: RelationshipModel; aggregate: boolean }[];
  /** Whether the table's aggregate types are shown (its `_aggregate` root field and relationships' `<name>_aggregate`). */
  aggregates: boolean;
  roots: Set<RootKind>;
}

const ROOT_KINDS: readonly RootKind[] = ['select', 'selectByPk', 'selectAggregate'];

/** The whole table, as the admin sees it. */
export function wholeView(table: TableModel): TableView {
  return {
    table,
    columns: table.columns,
    relationships: [...table.relationships.values()].map((relationship) => ({ relationship, aggregate: relationship.kind === 'array' })),
    aggregates: true,
    roots: new Set(table.primaryKey.length > 0 ? ROOT_KINDS : ROOT_KINDS.filter((kind) => kind !== 'selectByPk')),
  };
}

/**
 * The tables as `role` sees them, Hasura's way: only tables it has a select permission on, with
 * only the permitted columns, relationships only to such tables, aggregates only with
 * allow_aggregations, `_by_pk` only when every primary key column is permitted, and of the root
 * fields only those query_root_fields names. A permission that opens no column shows nothing of
 * its table (a GraphQL object type needs a field).
 */
export function roleViews(tables: readonly TableModel[], role: string): TableView[] {
  const permitted = new Map(
    tables.flatMap((table) => {
      const permission = table.permissions.get(role);
      return permission && table.columns.some((column) => permission.columns.has(column.name)) ? [[table, permission] as const] : [];
    }),
  );
  return [...permitted].map(([table, permission]) => {
    const roots = new Set<RootKind>();
    if (permission.rootFields.has('select')) roots.add('select');
    if (permission.rootFields.has('selectByPk') && table.primaryKey.length > 0 && table.primaryKey.every((column) => permission.columns.has(column.name))) {
      roots.add('selectByPk');
    }
    if (permission.rootFields.has('selectAggregate') && permission.allowAggregations) roots.add('selectAggregate');
    return {
      table,
      columns: table.columns.filter((column) => permission.columns.has(column.name)),
      relationships: [...table.relationships.values()]
        .filter((relationship) => permitted.has(relationship.target))
        .map((relationship) => ({ relationship, aggregate: relationship.kind === 'array' && permitted.get(relationship.target)!.allowAggregations })),
      aggregates: permission.allowAggregations,
      roots,
    };
  });
}

/** Whether `role`'s views of `tables` are the whole tables (so the role is served the whole schema). */
export function seesEverything(tables: readonly TableModel[], role: string): boolean {
  return tables.every((table) => {
    const permission = table.permissions.get(role);
    return (
      permission !== undefined &&
      permission.allowAggregations &&
      table.columns.every((column) => permission.columns.has(column.name)) &&
      [...wholeView(table).roots].every((kind) => permission.rootFields.has(kind))
    );
  });
}
