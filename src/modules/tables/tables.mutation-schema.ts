import { tableText } from './tables.metadata';
import { fieldType, NUMERIC_SCALARS, type ColumnModel, type MutationKind, type RelationshipModel, type TableModel } from './tables.model';
import type { TableView } from './tables.views';

/* The generated API's mutation types and root fields, in Hasura's names and shapes. */

/** The update operators of `update_<table>` and the input type each takes (Hasura's names). */
export const UPDATE_OPERATORS = ['_set', '_inc', '_append', '_prepend', '_delete_key', '_delete_elem', '_delete_at_path'] as const;
export type UpdateOperator = (typeof UPDATE_OPERATORS)[number];

const OPERATOR_TYPES: Record<UpdateOperator, string> = {
  _set: 'set_input',
  _inc: 'inc_input',
  _append: 'append_input',
  _prepend: 'prepend_input',
  _delete_key: 'delete_key_input',
  _delete_elem: 'delete_elem_input',
  _delete_at_path: 'delete_at_path_input',
};

const OPERATOR_DESCRIPTIONS: Record<UpdateOperator, string> = {
  _set: 'sets the columns of the filtered rows to the given values',
  _inc: 'increments the numeric columns with given value of the filtered values',
  _append: 'append existing jsonb value of filtered columns with new jsonb value',
  _prepend: 'prepend existing jsonb value of filtered columns with new jsonb value',
  _delete_key: 'delete key/value pair or string element. key/value pairs are matched based on their key value',
  _delete_elem: 'delete the array element with specified index (negative integers count from the end). throws an error if top level container is not an array',
  _delete_at_path: 'delete the field or element with specified path (for JSON arrays, negative integers count from the end)',
};

/** The columns an operator applies to, and the type of its value for each. */
function operatorColumns(operator: UpdateOperator, columns: readonly ColumnModel[]): [ColumnModel, string][] {
  const jsonb = columns.filter((column) => column.scalar === 'jsonb' && !column.array);
  switch (operator) {
    case '_set':
      return columns.map((column) => [column, fieldType(column)]);
    case '_inc':
      return columns
        .filter((column) => NUMERIC_SCALARS.has(column.scalar) && column.scalar !== 'money' && !column.array)
        .map((column) => [column, column.scalar]);
    case '_append':
    case '_prepend':
      return jsonb.map((column) => [column, 'jsonb']);
    case '_delete_key':
      return jsonb.map((column) => [column, 'String']);
    case '_delete_elem':
      return jsonb.map((column) => [column, 'Int']);
    case '_delete_at_path':
      return jsonb.map((column) => [column, '[String!]']);
  }
}

/** Names of the mutation types of `table` (all begin with its type name). */
export function mutationTypeNames(table: TableModel): string[] {
  const base = table.typeName;
  return [
    `${base}_mutation_response`,
    `${base}_insert_input`,
    `${base}_on_conflict`,
    `${base}_constraint`,
    `${base}_update_column`,
    `${base}_pk_columns_input`,
    `${base}_updates`,
    relationshipInsertType(table, 'object'),
    relationshipInsertType(table, 'array'),
    ...UPDATE_OPERATORS.map((operator) => `${base}_${OPERATOR_TYPES[operator]}`),
  ];
}

/** The mutation root field names of a table (by_pk ones only with a primary key). */
export function mutationFieldNames(table: TableModel): string[] {
  const roots = table.mutationRoots;
  const names = [roots.insert, roots.insertOne, roots.update, roots.updateMany, roots.delete];
  return table.primaryKey.length ? [...names, roots.updateByPk, roots.deleteByPk] : names;
}

/** Hasura's input type of a nested insert into `target` through an object or array relationship. */
const relationshipInsertType = (target: TableModel, kind: RelationshipModel['kind']) =>
  `${target.typeName}_${kind === 'object' ? 'obj' : 'arr'}_rel_insert_input`;

/** The view of `table` among `views` when it shows an insert (an insert input type). */
const insertView = (table: TableModel, views: readonly TableView[]) => views.find((view) => view.table === table && view.mutations.insert?.columns.length);

/** The relationships a nested insert into `view`'s table may go through: those into a table the views show an insert of (Hasura's rule). */
export function insertRelationships(view: TableView, views: readonly TableView[]): RelationshipModel[] {
  if (!view.mutations.insert) return [];
  return [...view.table.relationships.values()].filter((relationship) => insertView(relationship.target, views));
}

/** `<target>_obj_rel_insert_input` and `<target>_arr_rel_insert_input`, for the relationships the views insert through. */
export function relationshipInsertTypesSdl(views: readonly TableView[]): string[] {
  const parts = new Map<string, string>();
  for (const view of views) {
    for (const { target, kind } of insertRelationships(view, views)) {
      const name = relationshipInsertType(target, kind);
      if (parts.has(name)) continue;
      const data = kind === 'object' ? `${target.typeName}_insert_input!` : `[${target.typeName}_insert_input!]!`;
      const onConflict = insertView(target, views)!.mutations.insert!.upsert ? `\n  """upsert condition"""\n  on_conflict: ${target.typeName}_on_conflict` : '';
      const described = `input type for inserting ${kind} relation for remote table ${JSON.stringify(tableText(target.table)).slice(1, -1)}`;
      parts.set(name, `"""\n${described}\n"""\ninput ${name} {\n  data: ${data}${onConflict}\n}`);
    }
  }
  return [...parts.values()];
}

/** The input and output types of the mutations `view` shows (`views`: all the schema shows, for the relationships an insert goes through). */
export function mutationTypesSdl(view: TableView, views: readonly TableView[]): string[] {
  const { table, mutations } = view;
  const name = table.typeName;
  const described = `table ${tableText(table.table)}`;
  if (!mutations.insert && !mutations.update && !mutations.delete) return [];
  const parts: string[] = [];
  const response = ['  """number of rows affected by the mutation"""\n  affected_rows: Int!'];
  if (view.select) response.push(`  """data from the rows affected by the mutation"""\n  returning: [${name}!]!`);
  parts.push(`"""response of any mutation on the ${described}"""\ntype ${name}_mutation_response {\n${response.join('\n')}\n}`);
  const insert = mutations.insert;
  if (insert && insert.columns.length) {
    const relationships = insertRelationships(view, views).map(
      (relationship) => `\n  ${relationship.name}: ${relationshipInsertType(relationship.target, relationship.kind)}`,
    );
    parts.push(
      `"""input type for inserting data into ${described}"""\ninput ${name}_insert_input {\n${fieldLines(insert.columns.map((column) => [column, fieldType(column)]))}${relationships.join('')}\n}`,
    );
  }
  if (insert?.upsert) {
    const constraints = table.constraints.map(
      (constraint) => `  """unique or primary key constraint on columns ${constraint.columns.join(', ')}"""\n  ${constraint.name}`,
    );
    parts.push(`"""unique or primary key constraints on ${described}"""\nenum ${name}_constraint {\n${constraints.join('\n')}\n}`);
    // An enum needs a value: Hasura's placeholder when no column may be updated.
    const updatable = insert.upsert.updateColumns.map((column) => `  """column name"""\n  ${column.field}`);
    parts.push(
      `"""update columns of ${described}"""\nenum ${name}_update_column {\n${updatable.length ? updatable.join('\n') : '  """placeholder (do not use)"""\n  _PLACEHOLDER'}\n}`,
    );
    parts.push(
      `"""on_conflict condition type for ${described}"""\ninput ${name}_on_conflict {\n  constraint: ${name}_constraint!\n  update_columns: [${name}_update_column!]! = []\n  where: ${name}_bool_exp\n}`,
    );
  }
  const update = mutations.update;
  if (update) {
    for (const operator of UPDATE_OPERATORS) {
      const columns = operatorColumns(operator, update.columns);
      if (columns.length) parts.push(`"""${OPERATOR_DESCRIPTIONS[operator]}"""\ninput ${name}_${OPERATOR_TYPES[operator]} {\n${fieldLines(columns)}\n}`);
    }
    parts.push(
      `input ${name}_updates {\n${[...operatorArguments(view), `  """filter the rows which have to be updated"""\n  where: ${name}_bool_exp!`].join('\n')}\n}`,
    );
  }
  if ((update?.byPk || mutations.delete?.byPk) && table.primaryKey.length) {
    const keys = table.primaryKey.map((column) => `  ${column.field}: ${fieldType(column)}!`).join('\n');
    parts.push(`"""primary key columns input for ${described}"""\ninput ${name}_pk_columns_input {\n${keys}\n}`);
  }
  return parts;
}

function fieldLines(columns: readonly [ColumnModel, string][]): string {
  return columns.map(([column, type]) => `  ${column.field}: ${type}`).join('\n');
}

/** `_set: <table>_set_input` ... for each operator with a column to apply to. */
function operatorArguments(view: TableView): string[] {
  const columns = view.mutations.update?.columns ?? [];
  return UPDATE_OPERATORS.filter((operator) => operatorColumns(operator, columns).length).map(
    (operator) => `  """${OPERATOR_DESCRIPTIONS[operator]}"""\n  ${operator}: ${view.table.typeName}_${OPERATOR_TYPES[operator]}`,
  );
}

/** The mutation root fields `view` shows, as SDL field lines, with the kind of each. */
export function mutationRootsSdl(view: TableView): { kind: MutationKind; sdl: string }[] {
  const { table, mutations } = view;
  const name = table.typeName;
  const roots = table.mutationRoots;
  const described = `the table ${tableText(table.table)}`;
  const fields: { kind: MutationKind; sdl: string }[] = [];
  const insert = mutations.insert;
  if (insert && insert.columns.length) {
    const onConflict = insert.upsert ? `, """upsert condition"""\n    on_conflict: ${name}_on_conflict` : '';
    fields.push({
      kind: 'insert',
      sdl: `  """insert data into ${described}"""\n  ${roots.insert}("""the rows to be inserted"""\n    objects: [${name}_insert_input!]!${onConflict}): ${name}_mutation_response`,
    });
    if (insert.one) {
      fields.push({
        kind: 'insertOne',
        sdl: `  """insert a single row into ${described}"""\n  ${roots.insertOne}("""the row to be inserted"""\n    object: ${name}_insert_input!${onConflict}): ${name}`,
      });
    }
  }
  const update = mutations.update;
  if (update && update.columns.length) {
    const operators = operatorArguments(view)
      .map((line) => line.replace(/^ {2}/, '    '))
      .join(', ');
    fields.push({
      kind: 'update',
      sdl: `  """update data of ${described}"""\n  ${roots.update}(${operators}, """filter the rows which have to be updated"""\n    where: ${name}_bool_exp!): ${name}_mutation_response`,
    });
    if (update.byPk)
      fields.push({
        kind: 'updateByPk',
        sdl: `  """update single row of ${described}"""\n  ${roots.updateByPk}(${operators}, pk_columns: ${name}_pk_columns_input!): ${name}`,
      });
    fields.push({
      kind: 'updateMany',
      sdl: `  """update multiples rows of ${described}"""\n  ${roots.updateMany}("""updates to execute, in order"""\n    updates: [${name}_updates!]!): [${name}_mutation_response]`,
    });
  }
  if (mutations.delete) {
    fields.push({
      kind: 'delete',
      sdl: `  """delete data from ${described}"""\n  ${roots.delete}("""filter the rows which have to be deleted"""\n    where: ${name}_bool_exp!): ${name}_mutation_response`,
    });
    if (mutations.delete.byPk) {
      const keys = table.primaryKey.map((column) => `${column.field}: ${fieldType(column)}!`).join(', ');
      fields.push({ kind: 'deleteByPk', sdl: `  """delete single row from ${described}"""\n  ${roots.deleteByPk}(${keys}): ${name}` });
    }
  }
  return fields;
}

/** The scalars the mutations of `view` take (an insert-only view shows no column otherwise). */
export function mutationScalars(view: TableView): string[] {
  const scalars = [...(view.mutations.insert?.columns ?? []), ...(view.mutations.update?.columns ?? [])].map((column) => column.scalar);
  if (view.mutations.update?.columns.some((column) => column.scalar === 'jsonb' && !column.array)) scalars.push('jsonb');
  return scalars;
}
