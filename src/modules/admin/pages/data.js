// The data browser: the tracked tables, and a table's rows filtered, sorted, paged and edited
// through the generated GraphQL API as the admin (POST /api/data/graphql; no secret in the browser).
import { useCallback, useEffect, useState } from './hooks.js';
import { api, html } from './ui.js';

const OPERATORS = [
  ['_eq', '='],
  ['_neq', '≠'],
  ['_gt', '>'],
  ['_gte', '≥'],
  ['_lt', '<'],
  ['_lte', '≤'],
  ['_like', 'like'],
  ['_ilike', 'ilike'],
  ['_in', 'in (a, b, …)'],
  ['_is_null', 'is null'],
];
const PAGE_SIZES = [10, 25, 50, 100];
const NUMBER_SCALARS = new Set(['Int', 'smallint', 'Float', 'float8', 'bigint', 'numeric']);
const NUMBER = /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/;

/** A text typed in the page as the GraphQL value of a column (GraphQL reports a value its type refuses). */
function valueFor(column, text) {
  const trimmed = text.trim();
  if (column.array || column.scalar === 'json' || column.scalar === 'jsonb') {
    try {
      return JSON.parse(trimmed);
    } catch {
      return text;
    }
  }
  if (NUMBER_SCALARS.has(column.scalar) && NUMBER.test(trimmed) && Number.isSafeInteger(Math.trunc(Number(trimmed)))) return Number(trimmed);
  if (column.scalar === 'Boolean' && (trimmed === 'true' || trimmed === 'false')) return trimmed === 'true';
  return text;
}

/** A value read from the API as text to show or edit. */
function textOf(value) {
  if (value === null || value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** The `where` of the filter, or undefined without one. */
function whereOf(table, filter) {
  if (!filter) return undefined;
  const column = table.columns.find((each) => each.field === filter.field);
  if (!column) return undefined;
  let value;
  if (filter.operator === '_is_null') value = filter.value !== 'false';
  else if (filter.operator === '_in') value = filter.value.split(',').map((part) => valueFor(column, part.trim()));
  else value = valueFor(column, filter.value);
  return { [column.field]: { [filter.operator]: value } };
}

/** GraphQL's errors as one message each: the message, its code and path. */
function errorLines(body, status) {
  if (Array.isArray(body.errors) && body.errors.length) {
    return body.errors.map((error) => {
      const code = error.extensions && error.extensions.code ? ` (${error.extensions.code})` : '';
      const path = Array.isArray(error.path) ? ` at ${error.path.join('.')}` : '';
      return `${error.message}${code}${path}`;
    });
  }
  return [body.message || `The request failed (${status})`];
}

async function graphql(query, variables) {
  const answer = await api('POST', '/data/graphql', { query, variables });
  if (answer.status === 401) location.reload();
  return { data: answer.body.data, errors: answer.status === 200 && !answer.body.errors ? [] : errorLines(answer.body, answer.status) };
}

function Errors({ errors }) {
  return html`<div class="error data-errors" role="alert">
    ${
      errors.length > 0 &&
      html`<p>GraphQL said:</p>
        <ul>
          ${errors.map((line) => html`<li>${line}</li>`)}
        </ul>`
    }
  </div>`;
}

function TableList({ tables }) {
  if (tables.length === 0) {
    return html`<p>No table is tracked. Track one with <code>pg_track_table</code> (POST /v1/metadata) to browse its rows here.</p>`;
  }
  return html`<table>
    <caption class="visually-hidden">
      Tracked tables
    </caption>
    <thead>
      <tr>
        <th scope="col">Table</th>
        <th scope="col">GraphQL root field</th>
        <th scope="col">Columns</th>
        <th scope="col">Editable by key</th>
      </tr>
    </thead>
    <tbody>
      ${tables.map(
        (table) =>
          html`<tr key=${table.key} data-table=${table.key}>
            <th scope="row"><a href=${`/data/${encodeURIComponent(table.key)}`}>${table.key}</a></th>
            <td><code>${table.roots.select}</code></td>
            <td>${table.columns.length}</td>
            <td>${table.roots.updateByPk ? 'yes' : 'no (no primary key)'}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** The form editing one row; only the values changed are sent (`_set`). */
function RowEditor({ table, row, onSaved, onCancel }) {
  const initial = () =>
    Object.fromEntries(table.columns.map((column) => [column.field, { text: textOf(row[column.field]), isNull: row[column.field] === null }]));
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState([]);
  const [saving, setSaving] = useState(false);
  const keyText = table.columns
    .filter((column) => column.primaryKey)
    .map((column) => `${column.field} = ${textOf(row[column.field])}`)
    .join(', ');

  const save = async (event) => {
    event.preventDefault();
    const set = {};
    for (const column of table.columns) {
      if (column.primaryKey) continue;
      const now = values[column.field];
      const before = { text: textOf(row[column.field]), isNull: row[column.field] === null };
      if (now.isNull !== before.isNull || (!now.isNull && now.text !== before.text)) set[column.field] = now.isNull ? null : valueFor(column, now.text);
    }
    if (Object.keys(set).length === 0) return setErrors(['Nothing changed']);
    const pk = Object.fromEntries(table.columns.filter((column) => column.primaryKey).map((column) => [column.field, row[column.field]]));
    const fields = table.columns.map((column) => column.field).join(' ');
    setSaving(true);
    const answer = await graphql(
      `mutation Save($pk_columns: ${table.typeName}_pk_columns_input!, $_set: ${table.typeName}_set_input) { row: ${table.roots.updateByPk}(pk_columns: $pk_columns, _set: $_set) { ${fields} } }`,
      { pk_columns: pk, _set: set },
    );
    setSaving(false);
    if (answer.errors.length) return setErrors(answer.errors);
    if (!answer.data || !answer.data.row) return setErrors([`No row with ${keyText} any more: it was changed or deleted meanwhile`]);
    onSaved(`Saved the row with ${keyText}`);
  };

  const change = (field, patch) => setValues((current) => ({ ...current, [field]: { ...current[field], ...patch } }));

  return html`<form class="edit row-editor" onSubmit=${save} aria-labelledby="row-editor-title">
    <h2 id="row-editor-title">Edit the row with ${keyText}</h2>
    ${table.columns.map(
      (column) =>
        html`<div class="field" key=${column.field}>
          <label for=${`edit-${column.field}`}>${column.field} <span class="muted">${column.scalar}${column.array ? '[]' : ''}</span></label>
          <input
            id=${`edit-${column.field}`}
            value=${values[column.field].text}
            readonly=${column.primaryKey}
            disabled=${values[column.field].isNull}
            onInput=${(event) => change(column.field, { text: event.currentTarget.value })}
          />
          ${
            column.nullable &&
            !column.primaryKey &&
            html`<label class="null-toggle"
              ><input
                type="checkbox"
                checked=${values[column.field].isNull}
                onChange=${(event) => change(column.field, { isNull: event.currentTarget.checked })}
              />
              null</label
            >`
          }
        </div>`,
    )}
    <div class="controls">
      <button type="submit" disabled=${saving}>Save</button>
      <button type="button" onClick=${onCancel}>Cancel</button>
    </div>
    <${Errors} errors=${errors} />
  </form>`;
}

function TableRows({ table }) {
  const [filterDraft, setFilterDraft] = useState({ field: table.columns[0].field, operator: '_eq', value: '' });
  const [filter, setFilter] = useState(null);
  const [sort, setSort] = useState({ field: (table.columns.find((column) => column.primaryKey) || table.columns[0]).field, direction: 'asc' });
  const [pageSize, setPageSize] = useState(PAGE_SIZES[1]);
  const [offset, setOffset] = useState(0);
  const [result, setResult] = useState(null);
  const [errors, setErrors] = useState([]);
  const [editing, setEditing] = useState(null);
  const [notice, setNotice] = useState('');

  const load = useCallback(async () => {
    const fields = table.columns.map((column) => column.field).join(' ');
    const answer = await graphql(
      `query Browse($where: ${table.typeName}_bool_exp, $order_by: [${table.typeName}_order_by!], $limit: Int, $offset: Int) {
        rows: ${table.roots.select}(where: $where, order_by: $order_by, limit: $limit, offset: $offset) { ${fields} }
        total: ${table.roots.selectAggregate}(where: $where) { aggregate { count } }
      }`,
      { where: whereOf(table, filter), order_by: [{ [sort.field]: sort.direction }], limit: pageSize, offset },
    );
    setErrors(answer.errors);
    // Rows of another filter would pass for this one's.
    if (!answer.data) return setResult(null);
    const total = answer.data.total.aggregate.count;
    // Past the end (rows left the filter, or were deleted): the last page instead.
    if (answer.data.rows.length === 0 && offset > 0 && total > 0) return setOffset(Math.floor((total - 1) / pageSize) * pageSize);
    setResult({ rows: answer.data.rows, total });
  }, [table, filter, sort, pageSize, offset]);
  useEffect(() => {
    load();
  }, [load]);

  const apply = (event) => {
    event.preventDefault();
    setOffset(0);
    setNotice('');
    setFilter({ ...filterDraft });
  };
  const clear = () => {
    setOffset(0);
    setFilter(null);
    setFilterDraft({ ...filterDraft, value: '' });
  };
  const keyOf = (row) =>
    table.columns
      .filter((column) => column.primaryKey)
      .map((column) => textOf(row[column.field]))
      .join('/');

  const first = result && result.rows.length ? offset + 1 : 0;
  const last = result ? offset + result.rows.length : 0;
  return html`<div>
    <form class="controls data-filter" onSubmit=${apply} aria-label="Filter rows">
      <label for="filter-column">Filter</label>
      <select id="filter-column" value=${filterDraft.field} onChange=${(event) => setFilterDraft({ ...filterDraft, field: event.currentTarget.value })}>
        ${table.columns.map((column) => html`<option value=${column.field}>${column.field}</option>`)}
      </select>
      <label for="filter-operator" class="visually-hidden">Operator</label>
      <select id="filter-operator" value=${filterDraft.operator} onChange=${(event) => setFilterDraft({ ...filterDraft, operator: event.currentTarget.value })}>
        ${OPERATORS.map(([operator, label]) => html`<option value=${operator}>${label}</option>`)}
      </select>
      <label for="filter-value" class="visually-hidden">Value</label>
      <input
        id="filter-value"
        placeholder=${filterDraft.operator === '_is_null' ? 'true or false' : 'value'}
        value=${filterDraft.value}
        onInput=${(event) => setFilterDraft({ ...filterDraft, value: event.currentTarget.value })}
      />
      <button type="submit">Apply</button>
      <button type="button" onClick=${clear} disabled=${!filter}>Clear</button>
    </form>
    <div class="controls data-sort">
      <label for="sort-column">Sort by</label>
      <select
        id="sort-column"
        value=${sort.field}
        onChange=${(event) => {
          setOffset(0);
          setSort({ ...sort, field: event.currentTarget.value });
        }}
      >
        ${table.columns.map((column) => html`<option value=${column.field}>${column.field}</option>`)}
      </select>
      <label for="sort-direction" class="visually-hidden">Direction</label>
      <select
        id="sort-direction"
        value=${sort.direction}
        onChange=${(event) => {
          setOffset(0);
          setSort({ ...sort, direction: event.currentTarget.value });
        }}
      >
        <option value="asc">ascending</option>
        <option value="desc">descending</option>
      </select>
      <label for="page-size">Rows per page</label>
      <select
        id="page-size"
        value=${String(pageSize)}
        onChange=${(event) => {
          setOffset(0);
          setPageSize(Number(event.currentTarget.value));
        }}
      >
        ${PAGE_SIZES.map((size) => html`<option value=${String(size)}>${size}</option>`)}
      </select>
    </div>
    <p class="saved" role="status">${notice}</p>
    <${Errors} errors=${errors} />
    ${
      editing &&
      html`<${RowEditor}
        key=${keyOf(editing)}
        table=${table}
        row=${editing}
        onCancel=${() => setEditing(null)}
        onSaved=${(text) => {
          setEditing(null);
          setNotice(text);
          load();
        }}
      />`
    }
    ${
      result &&
      html`<p class="data-page" aria-live="polite">
          ${result.total === 0 ? 'No rows' : `Rows ${first}–${last} of ${result.total}`}${filter ? ' (filtered)' : ''}
          <button type="button" onClick=${() => setOffset(Math.max(0, offset - pageSize))} disabled=${offset === 0}>Previous page</button>
          <button type="button" onClick=${() => setOffset(offset + pageSize)} disabled=${last >= result.total}>Next page</button>
        </p>
        <div class="data-rows">
          <table>
            <caption class="visually-hidden">
              Rows of ${table.key}
            </caption>
            <thead>
              <tr>
                ${table.columns.map(
                  (column) =>
                    html`<th scope="col" aria-sort=${sort.field === column.field ? (sort.direction === 'asc' ? 'ascending' : 'descending') : undefined}>
                      ${column.field}${column.primaryKey ? html` <span class="muted">(key)</span>` : ''}${sort.field === column.field ? (sort.direction === 'asc' ? ' ↑' : ' ↓') : ''}
                    </th>`,
                )}
                ${table.roots.updateByPk && html`<th scope="col"><span class="visually-hidden">Actions</span></th>`}
              </tr>
            </thead>
            <tbody>
              ${result.rows.map(
                (row) =>
                  html`<tr key=${keyOf(row)} data-row=${keyOf(row)}>
                    ${table.columns.map((column) =>
                      row[column.field] === null ? html`<td class="muted">null</td>` : html`<td>${textOf(row[column.field])}</td>`,
                    )}
                    ${
                      table.roots.updateByPk &&
                      html`<td>
                        <button
                          type="button"
                          aria-label=${`Edit row ${keyOf(row)}`}
                          onClick=${() => {
                            setNotice('');
                            setEditing(row);
                          }}
                        >
                          Edit
                        </button>
                      </td>`
                    }
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>`
    }
  </div>`;
}

export function DataBrowser({ table: key }) {
  const [tables, setTables] = useState(null);
  const [error, setError] = useState('');
  useEffect(() => {
    api('GET', '/data/tables').then((answer) => {
      if (answer.status === 401) return location.reload();
      if (answer.status !== 200) return setError(answer.body.message || `The tables are unavailable (${answer.status})`);
      setTables(answer.body.tables);
    });
  }, []);
  const table = key && tables ? tables.find((each) => each.key === key) : undefined;
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">${key ? html`Data: <code>${key}</code>` : 'Data'}</h1>
    ${key && html`<p><a href="/data">All tracked tables</a></p>`}
    <p class="error" role="alert">${error}</p>
    ${tables && !key && html`<${TableList} tables=${tables} />`} ${tables && key && !table && html`<p class="error">No tracked table ${key}.</p>`}
    ${table && html`<${TableRows} key=${table.key} table=${table} />`}
  </section>`;
}
