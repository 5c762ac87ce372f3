import { tableText } from './tables.metadata';
import type { ColumnModel, TableModel } from './tables.model';
import type { TableView } from './tables.views';

/** Hasura's enum of a stream cursor's direction, declared once. */
export const CURSOR_ORDERING_ENUM = `"""ordering argument of a cursor"""
enum cursor_ordering {
  """ascending ordering of the cursor"""
  ASC
  """descending ordering of the cursor"""
  DESC
}`;

/**
 * The columns that may be a stream's cursor: those PostgreSQL compares with `>` and `<`. json has
 * no order; arrays are left out (an array's order is rarely what a stream means).
 */
export function cursorColumns(columns: readonly ColumnModel[]): ColumnModel[] {
  return columns.filter((column) => !column.array && column.scalar !== 'json');
}

/** The input types a table's stream takes (all begin with its type name). */
export function streamTypeNames(table: TableModel): string[] {
  return [`${table.typeName}_stream_cursor_input`, `${table.typeName}_stream_cursor_value_input`];
}

/** Whether the view shows `<table>_stream`: the permission opens it and at least one column can be its cursor. */
export function showsStream(view: TableView): boolean {
  return view.select && view.stream && cursorColumns(view.columns).length > 0;
}

/** Hasura's `<table>_stream_cursor_input` and `<table>_stream_cursor_value_input` of a view that shows the stream. */
export function streamTypesSdl(view: TableView): string[] {
  if (!showsStream(view)) return [];
  const name = view.table.typeName;
  const values = cursorColumns(view.columns).map((column) => `  ${column.field}: ${column.scalar}`);
  return [
    `${JSON.stringify(`Streaming cursor of the table "${name}"`)}\ninput ${name}_stream_cursor_input {\n  """Stream column input with initial value"""\n  initial_value: ${name}_stream_cursor_value_input!\n  """cursor ordering"""\n  ordering: cursor_ordering\n}`,
    `"""Initial value of the column from where the streaming should start"""\ninput ${name}_stream_cursor_value_input {\n${values.join('\n')}\n}`,
  ];
}

/** The `<table>_stream` subscription field of a view that shows it. */
export function streamRootSdl(view: TableView): string | undefined {
  if (!showsStream(view)) return undefined;
  const { table } = view;
  const name = table.typeName;
  const description = JSON.stringify(`fetch data from the table in a streaming manner: "${tableText(table.table)}"`);
  return (
    `  ${description}\n  ${table.streamRoot}(` +
    `"""maximum number of rows returned in a single batch""" batch_size: Int!, ` +
    `"""cursor to stream the results returned by the query""" cursor: [${name}_stream_cursor_input]!, ` +
    `"""filter the rows which have to be returned""" where: ${name}_bool_exp): [${name}!]!`
  );
}
