import { GraphQLError, type FieldNode } from 'graphql';
import { SESSION_VARIABLES_SETTING } from '../../db/session-variables';
import { arrayLiteral, sessionValue } from './tables.comparisons';
import { StatementCompiler, type Operation, type Reader } from './tables.compiler';
import { isObject, tableText, type BoolExp, type ColumnPresets } from './tables.metadata';
import type { ColumnModel, InsertPermissionModel, MutationKind, RelationshipModel, TableModel } from './tables.model';
import { UPDATE_OPERATORS, type UpdateOperator } from './tables.mutation-schema';
import { badInput, buildObject, key, notPermitted, qualified, quote, SessionValue, type CompiledStatement } from './tables.sql';

/** Whom a write is compiled for: a reader, and whether the session may use backend_only permissions. */
export interface Writer extends Reader {
  backend: boolean;
}

/**
 * One root field's writes: one statement (update_many: one per update, in order), each answering
 * one row with `j` (the field's JSON); a written row failing its permission's check aborts it
 * (SQLSTATE CHECK_FAILED). `shape` says how the answers make the field's value.
 */
export interface CompiledWrite {
  /**
   * A nested insert's writes, run before `statements`: it answers `written` (each group's rows as JSON
   * text, which `statements` bind as WrittenRows) and `gap` (the index in `gaps` of the refusal of a row with
   * relationships that was not written, or null).
   */
  nested?: { statement: CompiledStatement; gaps: string[] };
  statements: CompiledStatement[];
  shape: 'response' | 'row' | 'responses';
  /**
   * The field's write as one statement that records the session itself (a field of one statement
   * and no nested rows): `statements[0]` with a first CTE setting `plinth.session_variables` and
   * `hasura.user` transaction-locally, read by the SELECT before it reads the write, so both are set
   * before any row is written or any trigger fires. It binds `statements[0]`'s values, then two
   * more: the session as JSON with Plinth's names, then with Hasura's.
   */
  alone?: CompiledStatement;
}

/**
 * The SQLSTATE of `plinth_check_failed()` (migrations/1797400000000-PermissionCheckFailed.ts),
 * which a write's statement calls when a written row fails its permission's check.
 */
export const CHECK_FAILED = 'PL403';

/** A write's statement before it is text: its CTEs (the write first) and its select list. */
interface WriteStatement {
  ctes: string[];
  select: string;
}

function statementText({ ctes, select }: WriteStatement): string {
  return `WITH ${ctes.join(', ')} SELECT ${select}`;
}

/** `statement` recording the session first (CompiledWrite.alone), its session values bound after its `bound` own. */
function aloneText({ ctes, select }: WriteStatement, bound: number): string {
  const session = `"_session" AS MATERIALIZED (SELECT set_config('${SESSION_VARIABLES_SETTING}', $${bound + 1}, true), set_config('hasura.user', $${bound + 2}, true))`;
  // The SELECT reads "_session" before its list reads the write: PostgreSQL runs a data-modifying CTE when it is first read.
  return `WITH ${[session, ...ctes].join(', ')} SELECT ${select} FROM "_session"`;
}

/** A bound value of a nested insert's answer: the rows of one group (by index) its writes answered, as JSON. */
export class WrittenRows {
  constructor(readonly index: number) {}
}

/** The CTEs of a nested insert's writes: each table's written rows by group (the root field's rows first), and the rows whose absence refuses the insert. */
interface NestedPlan {
  ctes: string[];
  groups: Map<string, { table: TableModel; ctes: string[] }>;
  gaps: { cte: string; message: string }[];
}

/** The key of a nested insert's group of the root field's own rows (the others are keyed by their table). */
const ROOT_ROWS = '';

/** Columns of a nested row the row it is a child of determines: its CTE, and pairs of (column of the child, column of the parent). */
interface NestedLink {
  cte: string;
  columns: [string, string][];
}

/** The written rows, as the CTE `"_w"` returns them. */
const WRITTEN = '"_w"';
/** Set on each row an upsert returns: whether it was inserted (not updated). */
const INSERTED = '_plinth_inserted';

/** Hasura's refusal when a written row fails its permission's check (CHECK_FAILED): the whole mutation is rolled back. */
export function checkFailed(): GraphQLError {
  return new GraphQLError('check constraint of an insert/update permission has failed', { extensions: { code: 'permission-error' } });
}

interface OnConflict {
  constraint: string;
  update_columns?: string[];
  where?: BoolExp | null;
}

/**
 * Compiles a mutation root field into data-modifying statements: the write in a CTE returning
 * the written rows, then one SELECT building the field's JSON (`affected_rows`, `returning`
 * under the role's select permission) and checking the rows against the permission's `check`.
 */
export class MutationCompiler extends StatementCompiler {
  constructor(
    private readonly writer: Writer,
    tables: ReadonlyMap<string, TableModel>,
    given: Operation,
  ) {
    super(writer, tables, given);
  }

  compileWrite(table: TableModel, kind: MutationKind): CompiledWrite {
    const node = this.operation.fieldNodes[0];
    const args = this.readAll(this.argumentsOf(this.operation.parentType, node)) as Record<string, unknown>;
    const field = this.operation.parentType.getFields()[node.name.value];
    const fields = this.fieldsOf(
      this.operation.fieldNodes.map((fieldNode) => fieldNode.selectionSet),
      field.type,
    );
    const single = (statement: WriteStatement, shape: CompiledWrite['shape']): CompiledWrite => ({
      statements: [{ text: statementText(statement), parameters: this.parameters }],
      shape,
      alone: { text: aloneText(statement, this.parameters.length), parameters: this.parameters },
    });
    switch (kind) {
      case 'insert':
      case 'insertOne': {
        const one = kind === 'insertOne';
        const objects = (one ? [args.object] : args.objects) as Record<string, unknown>[];
        const onConflict = args.on_conflict as OnConflict | null;
        if (!Array.isArray(objects)) throw badInput(`objects of ${table.typeName} must be a list`);
        const nested = objects.some((object) => isObject(object) && Object.keys(object).some((name) => table.relationships.has(name)));
        if (nested) return this.nestedInsert(table, objects, onConflict, fields, one);
        return single(this.insert(table, objects, onConflict, fields, one), one ? 'row' : 'response');
      }
      case 'update':
        return single(this.update(table, args, this.whereOf(table, args.where), fields, false), 'response');
      case 'updateByPk':
        return single(this.update(table, args, this.keyCondition(table, args.pk_columns), fields, true), 'row');
      case 'updateMany': {
        const updates = (args.updates ?? []) as Record<string, unknown>[];
        // Each update is its own statement, run in order: a later one sees what an earlier one wrote.
        const statements = updates.map((update) => {
          const compiler = new MutationCompiler(this.writer, this.tables, this.operation);
          return { text: statementText(compiler.update(table, update, compiler.whereOf(table, update.where), fields, false)), parameters: compiler.parameters };
        });
        return { statements, shape: 'responses' };
      }
      case 'delete':
        return single(this.remove(table, this.whereOf(table, args.where), fields, false), 'response');
      case 'deleteByPk':
        return single(this.remove(table, this.keyCondition(table, args), fields, true), 'row');
    }
  }

  /** A `where` argument as a condition on the target alias `_0` (compiled before the write, so `_0` is taken first). */
  private whereOf(table: TableModel, where: unknown): (alias: string) => string {
    return (alias) => this.boolExp(where ?? {}, table, alias, 'query');
  }

  private keyCondition(table: TableModel, given: unknown): (alias: string) => string {
    const values = isObject(given) ? given : {};
    return (alias) =>
      table.primaryKey
        .map((column) => {
          const value = values[column.field];
          if (value === undefined || value === null) throw badInput(`the primary key column "${column.field}" is required`);
          return `${alias}.${quote(column.name)} = ${this.bind(value, column.sqlType)}`;
        })
        .join(' AND ');
  }

  /** The role's insert permission on `table` (undefined for the admin), which the role's schema showed. */
  private insertPermission(table: TableModel): InsertPermissionModel | undefined {
    if (this.writer.admin) return undefined;
    const permission = table.insertPermissions.get(this.writer.role);
    if (!permission || (permission.backendOnly && !this.writer.backend)) throw notPermitted(`inserting into ${tableText(table.table)}`);
    return permission;
  }

  /** The column of a row's field, which the role's insert permission must open (a preset column is not the client's). */
  private insertColumn(table: TableModel, name: string, permission: InsertPermissionModel | undefined): ColumnModel {
    const column = table.columnsByField.get(name);
    if (!column || (permission && (!permission.columns.has(column.name) || column.name in permission.set)))
      throw notPermitted(`the column ${name} of ${table.typeName}`);
    return column;
  }

  private insert(table: TableModel, objects: Record<string, unknown>[], onConflict: OnConflict | null, fields: FieldNode[], one: boolean): WriteStatement {
    const permission = this.insertPermission(table);
    const presets = permission?.set ?? {};
    const given: ColumnModel[] = [];
    for (const object of objects) {
      if (!isObject(object)) throw badInput(`a row to insert into ${table.typeName} must be an object`);
      for (const name of Object.keys(object)) {
        const column = this.insertColumn(table, name, permission);
        if (!given.includes(column)) given.push(column);
      }
    }
    const alias = this.alias();
    const preset = this.presetColumns(table, presets);
    const columns = [...given, ...preset.map(([column]) => column)];
    if (objects.length === 0) return this.finish(table, `SELECT ${alias}.* FROM ${qualified(table)} AS ${alias} WHERE false`, fields, one, undefined);
    if (columns.length === 0 && objects.length > 1) throw badInput(`give at least one column of each row to insert into ${table.typeName}`);
    const rows = objects.map((object) => {
      const values = given.map((column) => (object[column.field] === undefined ? 'DEFAULT' : this.bindColumn(column, object[column.field])));
      return `(${[...values, ...preset.map(([column, value]) => this.bindColumn(column, value))].join(', ')})`;
    });
    const target = `${qualified(table)} AS ${alias}`;
    let text = columns.length
      ? `INSERT INTO ${target} (${columns.map((column) => quote(column.name)).join(', ')}) VALUES ${rows.join(', ')}`
      : `INSERT INTO ${target} DEFAULT VALUES`;
    const conflict = this.onConflictClause(table, alias, onConflict);
    text += `${conflict.text} RETURNING ${alias}.*${conflict.upsert ? `, (${alias}.xmax = 0) AS ${quote(INSERTED)}` : ''}`;
    const check = (at: string) => {
      const inserted = permission ? this.boolExp(permission.check, table, at, 'permission') : 'true';
      if (!conflict.upsert) return inserted;
      const updated = conflict.upsert.check ? this.boolExp(conflict.upsert.check, table, at, 'permission') : 'true';
      return `CASE WHEN ${at}.${quote(INSERTED)} THEN ${inserted} ELSE ${updated} END`;
    };
    return this.finish(table, text, fields, one, this.writer.admin ? undefined : check);
  }

  /** ` ON CONFLICT ...` of an insert into `table` under `alias` (empty without on_conflict); `upsert` when it may update a row, with the update permission's check. */
  private onConflictClause(table: TableModel, alias: string, onConflict: OnConflict | null): { text: string; upsert?: { check?: BoolExp } } {
    if (!onConflict) return { text: '' };
    if (!isObject(onConflict)) throw badInput(`on_conflict of ${table.typeName} must be an object`);
    const constraint = table.constraints.find((candidate) => candidate.name === onConflict.constraint);
    if (!constraint) throw badInput(`no constraint "${String(onConflict.constraint)}" on ${table.typeName}`);
    const update = this.writer.admin ? undefined : table.updatePermissions.get(this.writer.role);
    if (!this.writer.admin && !update) throw notPermitted(`the on_conflict argument of ${table.typeName}`);
    const updatePresets = update?.set ?? {};
    const sets = (onConflict.update_columns ?? []).map((name) => {
      const column = table.columnsByField.get(name);
      if (!column || (update && (!update.columns.has(column.name) || column.name in updatePresets)))
        throw notPermitted(`updating the column ${name} of ${table.typeName}`);
      return `${quote(column.name)} = EXCLUDED.${quote(column.name)}`;
    });
    if (sets.length === 0) return { text: ` ON CONFLICT ON CONSTRAINT ${quote(constraint.name)} DO NOTHING` };
    for (const [column, value] of this.presetColumns(table, updatePresets)) sets.push(`${quote(column.name)} = ${this.bindColumn(column, value)}`);
    const conditions = [this.boolExp(onConflict.where ?? {}, table, alias, 'query'), update ? this.boolExp(update.filter, table, alias, 'permission') : 'true'];
    return {
      text: ` ON CONFLICT ON CONSTRAINT ${quote(constraint.name)} DO UPDATE SET ${sets.join(', ')} WHERE ${conditions.join(' AND ')}`,
      upsert: { check: update?.check },
    };
  }

  /**
   * An insert whose rows carry rows of related tables (Hasura's nested insert). The first statement
   * writes every row, each in a CTE of its own: an object relationship's row before the row that
   * refers to it, an array relationship's rows after, their linking columns read from the CTE that
   * wrote the row they link to; it answers each table's written rows and whether a row with
   * relationships was not written. The second reads those rows back (now visible: one statement's
   * CTEs share its snapshot, so neither a check through a relationship nor `returning` would see the
   * rows written beside them), checks each against its permission and builds the field's JSON.
   */
  private nestedInsert(table: TableModel, objects: unknown[], onConflict: OnConflict | null, fields: FieldNode[], one: boolean): CompiledWrite {
    const plan: NestedPlan = { ctes: [], groups: new Map([[ROOT_ROWS, { table, ctes: [] }]]), gaps: [] };
    for (const object of objects) this.nestedRow(table, object, onConflict, [], plan, true);
    const groups = [...plan.groups.values()];
    const written = groups.map(({ ctes }) => {
      const rows = ctes.map((cte) => `SELECT * FROM ${cte}`).join(' UNION ALL ');
      // As text, bound back as it is: parsed in JavaScript, a bigint or numeric beyond a double's precision would change.
      return `(SELECT coalesce(json_agg("_r"), '[]')::text FROM (${rows}) AS "_r")`;
    });
    const gap = plan.gaps.length ? `CASE ${plan.gaps.map(({ cte }, index) => `WHEN NOT EXISTS (SELECT FROM ${cte}) THEN ${index}`).join(' ')} END` : 'NULL';
    const writes = `WITH ${plan.ctes.join(', ')} SELECT ARRAY[${written.join(', ')}] AS "written", ${gap}::int AS "gap"`;
    // The answer's own values: those of the writes are bound where they run.
    const answer = new MutationCompiler(this.writer, this.tables, this.operation);
    const decoded = groups.map((group, index) => answer.writtenRows(group.table, answer.bind(new WrittenRows(index), 'jsonb')));
    // Each group a CTE of the answer, so that its bound rows are in the text whatever the field selects.
    const others = groups.slice(1).map((group, index) => {
      const check = answer.writtenCheck(group.table);
      const [cte, alias] = [answer.alias(), answer.alias()];
      return {
        cte: `${cte} AS (SELECT * FROM ${decoded[index + 1]} AS "_r")`,
        count: `(SELECT count(*) FROM ${cte})`,
        check: check ? `(SELECT coalesce(bool_and(${check(alias)}), true) FROM ${cte} AS ${alias})` : undefined,
      };
    });
    const text = statementText(answer.finish(table, `SELECT * FROM ${decoded[0]} AS "_r"`, fields, one, answer.writtenCheck(table), others));
    return {
      nested: { statement: { text: writes, parameters: this.parameters }, gaps: plan.gaps.map(({ message }) => message) },
      statements: [{ text, parameters: answer.parameters }],
      shape: one ? 'row' : 'response',
    };
  }

  /**
   * One row of a nested insert into `table`, in a CTE of `plan` (its name returned), after the rows
   * its object relationships insert and before those its array relationships do. `links`: the
   * columns the row it is a child of determines.
   */
  private nestedRow(table: TableModel, object: unknown, onConflict: OnConflict | null, links: NestedLink[], plan: NestedPlan, root: boolean): string {
    const permission = this.insertPermission(table);
    if (!isObject(object)) throw badInput(`a row to insert into ${table.typeName} must be an object`);
    const presets = permission?.set ?? {};
    const given: [ColumnModel, unknown][] = [];
    const related: [RelationshipModel, { data: unknown; on_conflict?: OnConflict | null }][] = [];
    for (const [name, value] of Object.entries(object)) {
      const relationship = table.relationships.get(name);
      if (!relationship) given.push([this.insertColumn(table, name, permission), value]);
      // A relationship given null inserts nothing through it.
      else if (value !== null && value !== undefined) {
        const many = relationship.kind === 'array';
        if (!isObject(value) || (many ? !Array.isArray(value.data) : !isObject(value.data)))
          throw badInput(`the relationship ${name} of ${table.typeName} takes {data: ${many ? '[rows]' : 'row'}, on_conflict}`);
        related.push([relationship, value as { data: unknown; on_conflict?: OnConflict | null }]);
      }
    }
    /** The columns rows written before this one determine: column name to the value read from their CTE. */
    const determined = new Map<string, string>();
    for (const link of links) for (const [column, source] of link.columns) determined.set(column, `${link.cte}.${quote(source)}`);
    const fromParent = given.filter(([column]) => determined.has(column.name)).map(([column]) => JSON.stringify(column.name));
    if (fromParent.length) throw badInput(`cannot insert ${fromParent.join(', ')} columns as their values are already being determined by parent insert`);
    const sources = links.map((link) => link.cte);
    for (const [relationship, { data, on_conflict }] of related) {
      if (relationship.insertOrder !== 'beforeParent') continue;
      const taken = relationship.mapping.find(([column]) => determined.has(column) || given.some(([own]) => own.name === column));
      if (taken) throw badInput(`cannot insert object relationship "${relationship.name}" as "${taken[0]}" column values are already determined`);
      const parent = this.nestedRow(relationship.target, data, on_conflict ?? null, [], plan, false);
      const message = `cannot proceed to insert object relation "${relationship.name}" since insert to table "${tableText(relationship.target.table)}" affects zero rows`;
      plan.gaps.push({ cte: parent, message });
      for (const [column, source] of relationship.mapping) determined.set(column, `${parent}.${quote(source)}`);
      sources.push(parent);
    }
    const preset = this.presetColumns(table, presets);
    const presetTaken = preset.find(([column]) => determined.has(column.name));
    if (presetTaken)
      throw badInput(`the column "${presetTaken[0].name}" of ${table.typeName} is set by the role's insert permission, so no relationship may determine it`);
    const columns = [...given.map(([column]) => column.name), ...preset.map(([column]) => column.name), ...determined.keys()];
    const values = [...[...given, ...preset].map(([column, value]) => this.bindColumn(column, value)), ...determined.values()];
    const alias = this.alias();
    let text = `INSERT INTO ${qualified(table)} AS ${alias}`;
    const names = columns.map((column) => quote(column)).join(', ');
    if (columns.length === 0) text += ' DEFAULT VALUES';
    else if (sources.length) text += ` (${names}) SELECT ${values.join(', ')} FROM ${sources.join(', ')}`;
    else text += ` (${names}) VALUES (${values.join(', ')})`;
    const conflict = this.onConflictClause(table, alias, onConflict);
    text += `${conflict.text} RETURNING ${alias}.*, ${conflict.upsert ? `(${alias}.xmax = 0)` : 'true'} AS ${quote(INSERTED)}`;
    const cte = this.alias();
    plan.ctes.push(`${cte} AS (${text})`);
    const groupKey = root ? ROOT_ROWS : tableText(table.table);
    const group = plan.groups.get(groupKey) ?? { table, ctes: [] };
    group.ctes.push(cte);
    plan.groups.set(groupKey, group);
    const children = related.filter(([relationship]) => relationship.insertOrder === 'afterParent');
    if (children.length) {
      const message = `cannot proceed to insert array relations since insert to table "${tableText(table.table)}" affects zero rows`;
      plan.gaps.push({ cte, message });
    }
    for (const [relationship, { data, on_conflict }] of children) {
      const link: NestedLink = { cte, columns: relationship.mapping.map(([column, target]) => [target, column]) };
      for (const row of relationship.kind === 'array' ? (data as unknown[]) : [data])
        this.nestedRow(relationship.target, row, on_conflict ?? null, [link], plan, false);
    }
    return cte;
  }

  /** The rows a nested insert wrote into `table`, bound as JSON (`rows`), as a subquery: the table's row type, and whether each was inserted. */
  private writtenRows(table: TableModel, rows: string): string {
    return `(SELECT "_r".*, ("_e"."v"->>'${INSERTED}')::boolean AS ${quote(INSERTED)} FROM jsonb_array_elements(${rows}) AS "_e"("v"), jsonb_populate_record(NULL::${qualified(table)}, "_e"."v") AS "_r")`;
  }

  /** The check of a nested insert's rows of `table`: the insert permission's for an inserted row, the update permission's for one an upsert updated. */
  private writtenCheck(table: TableModel): ((alias: string) => string) | undefined {
    const permission = this.insertPermission(table);
    if (!permission) return undefined;
    const update = table.updatePermissions.get(this.writer.role)?.check;
    return (at) =>
      `CASE WHEN ${at}.${quote(INSERTED)} THEN ${this.boolExp(permission.check, table, at, 'permission')} ELSE ${update ? this.boolExp(update, table, at, 'permission') : 'true'} END`;
  }

  private update(table: TableModel, args: Record<string, unknown>, where: (alias: string) => string, fields: FieldNode[], one: boolean): WriteStatement {
    const permission = this.writer.admin ? undefined : table.updatePermissions.get(this.writer.role);
    if (!this.writer.admin && !permission) throw notPermitted(`updating ${tableText(table.table)}`);
    const presets = permission?.set ?? {};
    const alias = this.alias();
    const sets: string[] = [];
    const operatorOf = new Map<string, UpdateOperator>();
    for (const operator of UPDATE_OPERATORS) {
      const given = args[operator];
      if (given === undefined || given === null) continue;
      if (!isObject(given)) throw badInput(`${operator} must be an object`);
      for (const [name, value] of Object.entries(given)) {
        if (value === undefined) continue;
        const column = table.columnsByField.get(name);
        if (!column || (permission && (!permission.columns.has(column.name) || column.name in presets)))
          throw notPermitted(`updating the column ${name} of ${table.typeName}`);
        const earlier = operatorOf.get(column.name);
        if (earlier) throw badInput(`column found in multiple operators; "${name}" in ${earlier}, ${operator} operators`);
        operatorOf.set(column.name, operator);
        sets.push(`${quote(column.name)} = ${this.operation_(operator, column, `${alias}.${quote(column.name)}`, value)}`);
      }
    }
    for (const [column, value] of this.presetColumns(table, presets)) sets.push(`${quote(column.name)} = ${this.bindColumn(column, value)}`);
    if (sets.length === 0) throw badInput(`at least any one of ${UPDATE_OPERATORS.join(', ')} is expected`);
    const conditions = [where(alias), permission ? this.boolExp(permission.filter, table, alias, 'permission') : 'true'];
    const text = `UPDATE ${qualified(table)} AS ${alias} SET ${sets.join(', ')} WHERE ${conditions.join(' AND ')} RETURNING ${alias}.*`;
    const check = permission?.check;
    return this.finish(table, text, fields, one, check ? (at) => this.boolExp(check, table, at, 'permission') : undefined);
  }

  /** The new value of a column under one update operator. */
  private operation_(operator: UpdateOperator, column: ColumnModel, current: string, value: unknown): string {
    if (value === null && operator !== '_set') throw badInput(`${operator} on "${column.field}" cannot be null`);
    switch (operator) {
      case '_set':
        return this.bindColumn(column, value);
      case '_inc':
        return `${current} + ${this.bind(value, column.sqlType)}`;
      case '_append':
        return `${current} || ${this.bind(JSON.stringify(value), 'jsonb')}`;
      case '_prepend':
        return `${this.bind(JSON.stringify(value), 'jsonb')} || ${current}`;
      case '_delete_key':
        return `${current} - ${this.bind(value, 'text')}`;
      case '_delete_elem':
        return `${current} - ${this.bind(value, 'integer')}`;
      case '_delete_at_path':
        return `${current} #- ${this.bind(value, 'text[]')}`;
    }
  }

  private remove(table: TableModel, where: (alias: string) => string, fields: FieldNode[], one: boolean): WriteStatement {
    const permission = this.writer.admin ? undefined : table.deletePermissions.get(this.writer.role);
    if (!this.writer.admin && !permission) throw notPermitted(`deleting from ${tableText(table.table)}`);
    const alias = this.alias();
    const conditions = [where(alias), permission ? this.boolExp(permission.filter, table, alias, 'permission') : 'true'];
    return this.finish(table, `DELETE FROM ${qualified(table)} AS ${alias} WHERE ${conditions.join(' AND ')} RETURNING ${alias}.*`, fields, one, undefined);
  }

  /** The preset columns of a permission's `set`, each with its value (a session variable's marker, or the constant). */
  private presetColumns(table: TableModel, presets: ColumnPresets): [ColumnModel, unknown][] {
    return Object.entries(presets).map(([name, value]) => {
      const column = table.columns.find((candidate) => candidate.name === name);
      if (!column) throw new Error(`the preset column ${name} of ${tableText(table.table)} does not exist`);
      return [column, sessionValue(value)];
    });
  }

  /** A column's value as bound: JSON text for json and jsonb (an array column takes a list as it is). */
  private bindColumn(column: ColumnModel, value: unknown): string {
    const json = (column.scalar === 'json' || column.scalar === 'jsonb') && !column.array;
    if (value instanceof SessionValue) return this.bind(new SessionValue(value.name, json), column.sqlType);
    // A preset's text is PostgreSQL's array literal ("{a,b}"), as a session variable gives it.
    if (column.array && value !== null && typeof value !== 'string')
      return this.bind(arrayLiteral(column, value, `the value of ${column.field}`), column.sqlType);
    return this.bind(json && value !== null ? JSON.stringify(value) : value, column.sqlType);
  }

  /**
   * `WITH "_w" AS (<write>) SELECT <the field's JSON> AS j, <every row passes check, else raise> AS ok`:
   * the returned rows are those the role's select permission lets it read; a row failing the check
   * aborts the statement (CHECK_FAILED).
   */
  private finish(
    table: TableModel,
    write: string,
    fields: FieldNode[],
    one: boolean,
    check: ((alias: string) => string) | undefined,
    /** A nested insert's rows of other groups: each one's CTE, count (in affected_rows) and check. */
    others: { cte: string; count: string; check?: string }[] = [],
  ): WriteStatement {
    const rowsOf = (selected: FieldNode[], limit: boolean) => {
      const alias = this.alias();
      const { json, joins } = this.rowJson(table, alias, selected);
      const filter = this.permissionFilter(table, alias, this.writer.admin ? undefined : table.permissions.get(this.writer.role));
      return { json, from: `FROM ${WRITTEN} AS ${alias}${joins} WHERE ${filter}${limit ? ' LIMIT 1' : ''}` };
    };
    let json: string;
    if (one) {
      const rows = rowsOf(fields, true);
      json = `(SELECT ${rows.json} ${rows.from})`;
    } else {
      const responseType = this.objectType(`${table.typeName}_mutation_response`);
      const pairs: string[] = [];
      for (const node of fields) {
        const name = node.name.value;
        const responseKey = key(node.alias?.value ?? name);
        if (name === 'affected_rows') pairs.push(`${responseKey}, ${[`(SELECT count(*) FROM ${WRITTEN})`, ...others.map((other) => other.count)].join(' + ')}`);
        else if (name === 'returning') {
          const rows = rowsOf(this.fieldsOf([node.selectionSet], responseType.getFields().returning.type), false);
          pairs.push(`${responseKey}, (SELECT coalesce(json_agg(${rows.json}), '[]'::json) ${rows.from})`);
        }
      }
      json = buildObject(pairs);
    }
    const checked = check ? this.alias() : '';
    const checks = [
      ...(check ? [`(SELECT coalesce(bool_and(${check(checked)}), true) FROM ${WRITTEN} AS ${checked})`] : []),
      ...others.flatMap((other) => other.check ?? []),
    ];
    // CASE evaluates its branches in order: the function runs only when a row failed.
    const ok = checks.length ? `CASE WHEN ${checks.join(' AND ')} THEN true ELSE public.plinth_check_failed() END` : 'true';
    return { ctes: [`${WRITTEN} AS (${write})`, ...others.map((other) => other.cte)], select: `${json} AS "j", ${ok} AS "ok"` };
  }
}
