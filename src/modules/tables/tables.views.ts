import type { ColumnModel, PermissionModel, RelationshipModel, RootKind, TableModel } from './tables.model';

/** The mutations a schema shows of a tracked table, and the columns each takes. */
export interface MutationView {
  /** `one`: insert_<table>_one; `upsert`: the on_conflict argument, with the columns it may update. */
  insert?: { columns: ColumnModel[]; one: boolean; upsert?: { updateColumns: ColumnModel[] } };
  update?: { columns: ColumnModel[]; byPk: boolean };
  delete?: { byPk: boolean };
}

/** What a schema shows of a tracked table: all of it (the admin's), or what a role's select permission opens. */
export interface TableView {
  table: TableModel;
  columns: ColumnModel[];
  /** Relationships to tables of the same schema; `aggregate`: an array relationship's `<name>_aggregate` is shown. */
  relationships: { relationship: RelationshipModel; aggregate: boolean }[];
  /** Whether the table's aggregate types are shown (its `_aggregate` root field and relationships' `<name>_aggregate`). */
  aggregates: boolean;
  /** Its query root fields. */
  roots: Set<RootKind>;
  /** Its live query subscription fields (the same fields as the query ones, under subscription_root_fields). */
  subscriptionRoots: Set<RootKind>;
  /** Whether its streaming subscription field (`<table>_stream`) is shown. */
  stream: boolean;
  /** Whether its object type and query types are shown (a role may insert into a table it cannot read). */
  select: boolean;
  mutations: MutationView;
}

const ROOT_KINDS: readonly RootKind[] = ['select', 'selectByPk', 'selectAggregate'];

/** The whole table, as the admin sees it. */
export function wholeView(table: TableModel): TableView {
  const byPk = table.primaryKey.length > 0;
  const roots = byPk ? ROOT_KINDS : ROOT_KINDS.filter((kind) => kind !== 'selectByPk');
  return {
    select: true,
    mutations: {
      insert: { columns: table.columns, one: true, upsert: table.constraints.length ? { updateColumns: table.columns } : undefined },
      update: { columns: table.columns, byPk },
      delete: { byPk },
    },
    table,
    columns: table.columns,
    relationships: [...table.relationships.values()].map((relationship) => ({ relationship, aggregate: relationship.kind === 'array' })),
    aggregates: true,
    stream: true,
    roots: new Set(roots),
    subscriptionRoots: new Set(roots),
  };
}

/**
 * The tables as `role` sees them, Hasura's way: only tables it has a select permission on, with
 * only the permitted columns, relationships only to such tables, aggregates only with
 * allow_aggregations, `_by_pk` only when every primary key column is permitted, and of the root
 * fields only those query_root_fields names (of the live query subscription fields, those
 * subscription_root_fields names). A permission that opens no column shows nothing of
 * its table (a GraphQL object type needs a field).
 */
export function roleViews(tables: readonly TableModel[], role: string, backend = false): TableView[] {
  const permitted = new Map(
    tables.flatMap((table) => {
      const permission = table.permissions.get(role);
      return permission && table.columns.some((column) => permission.columns.has(column.name)) ? [[table, permission] as const] : [];
    }),
  );
  return tables.flatMap((table): TableView[] => {
    const permission = permitted.get(table);
    const mutations = mutationView(table, role, backend, permission);
    if (!permission)
      return mutations.insert
        ? [
            {
              table,
              columns: [],
              relationships: [],
              aggregates: false,
              roots: new Set(),
              subscriptionRoots: new Set(),
              stream: false,
              select: false,
              mutations,
            },
          ]
        : [];
    return [
      {
        table,
        columns: table.columns.filter((column) => permission.columns.has(column.name)),
        relationships: [...table.relationships.values()]
          .filter((relationship) => permitted.has(relationship.target))
          .map((relationship) => ({ relationship, aggregate: relationship.kind === 'array' && permitted.get(relationship.target)!.allowAggregations })),
        aggregates: permission.allowAggregations,
        roots: openRoots(table, permission, permission.rootFields),
        subscriptionRoots: openRoots(table, permission, permission.subscriptionRootFields),
        stream: permission.stream,
        select: true,
        mutations,
      },
    ];
  });
}

/** Of the root kinds a permission names, those it opens: `_by_pk` as byPkOpen, `_aggregate` only with allow_aggregations. */
function openRoots(table: TableModel, permission: PermissionModel, named: Set<RootKind>): Set<RootKind> {
  return new Set(
    [...named].filter((kind) => (kind === 'selectByPk' ? byPkOpen(table, permission) : kind === 'selectAggregate' ? permission.allowAggregations : true)),
  );
}

/** `_by_pk` fields need a primary key whose columns the select permission opens (Hasura's rule). */
const byPkOpen = (table: TableModel, permission: PermissionModel) =>
  table.primaryKey.length > 0 && table.primaryKey.every((column) => permission.columns.has(column.name));

/**
 * The mutations `role` may use on `table`: insert with the permitted columns but the preset ones
 * (a backend_only permission for backend sessions only), upsert and update/delete (whose `where`
 * is the select permission's `_bool_exp`) only beside a select permission, `_one` and `_by_pk`
 * only where the answer is a row the role may read.
 */
function mutationView(table: TableModel, role: string, backend: boolean, select: PermissionModel | undefined): MutationView {
  const view: MutationView = {};
  const settable = (columns: Set<string>, set: Record<string, unknown>) => table.columns.filter((column) => columns.has(column.name) && !(column.name in set));
  const insert = table.insertPermissions.get(role);
  const update = table.updatePermissions.get(role);
  const remove = table.deletePermissions.get(role);
  if (insert && (!insert.backendOnly || backend)) {
    const upsert = select && update && table.constraints.length ? { updateColumns: settable(update.columns, update.set) } : undefined;
    view.insert = { columns: settable(insert.columns, insert.set), one: select !== undefined, upsert };
  }
  if (select && update) view.update = { columns: settable(update.columns, update.set), byPk: byPkOpen(table, select) };
  if (select && remove) view.delete = { byPk: byPkOpen(table, select) };
  return view;
}

/** Whether `role`'s views of `tables` are the whole tables (so the role is served the whole schema). */
export function seesEverything(tables: readonly TableModel[], role: string): boolean {
  return tables.every((table) => {
    const permission = table.permissions.get(role);
    return (
      permission !== undefined &&
      permission.allowAggregations &&
      table.columns.every((column) => permission.columns.has(column.name)) &&
      [...wholeView(table).roots].every((kind) => permission.rootFields.has(kind) && permission.subscriptionRootFields.has(kind)) &&
      permission.stream &&
      writesEverything(table, role)
    );
  });
}

/** Whether `role` may insert, update and delete every column of `table` as the admin, without presets or backend_only. */
function writesEverything(table: TableModel, role: string): boolean {
  const insert = table.insertPermissions.get(role);
  const update = table.updatePermissions.get(role);
  const all = (columns: Set<string>) => table.columns.every((column) => columns.has(column.name));
  return (
    insert !== undefined &&
    !insert.backendOnly &&
    Object.keys(insert.set).length === 0 &&
    all(insert.columns) &&
    update !== undefined &&
    Object.keys(update.set).length === 0 &&
    all(update.columns) &&
    table.deletePermissions.has(role)
  );
}
