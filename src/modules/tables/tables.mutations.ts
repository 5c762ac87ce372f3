import { GraphQLError, type FieldNode } from 'graphql';
import { arrayLiteral, sessionValue } from './tables.comparisons';
import { StatementCompiler, type Operation, type Reader } from './tables.compiler';
import { isObject, tableText, type BoolExp, type ColumnPresets } from './tables.metadata';
import type { ColumnModel, MutationKind, TableModel } from './tables.model';
import { UPDATE_OPERATORS, type UpdateOperator } from './tables.mutation-schema';
import { badInput, buildObject, key, notPermitted, qualified, quote, SessionValue, type CompiledStatement } from './tables.sql';

/** Whom a write is compiled for: a reader, and whether the session may use backend_only permissions. */
export interface Writer extends Reader {
  backend: boolean;
}

/**
 * One root field's writes: one statement (update_many: one per update, in order), each answering
 * one row with `j` (the field's JSON) and `ok` (whether every written row passed its permission's
 * check). `shape` says how the answers make the field's value.
 */
export interface CompiledWrite {
  statements: CompiledStatement[];
  shape: 'response' | 'row' | 'responses';
}

/** The written rows, as the CTE `"_w"` returns them. */
const WRITTEN = '"_w"';
/** Set on each row an upsert returns: whether it was inserted (not updated). */
const INSERTED = '_plinth_inserted';

/** Hasura's refusal when a written row fails its permission's check: the whole mutation is rolled back. */
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
    const single = (text: string, shape: CompiledWrite['shape']): CompiledWrite => ({ statements: [{ text, parameters: this.parameters }], shape });
    switch (kind) {
      case 'insert':
        return single(this.insert(table, args.objects as Record<string, unknown>[], args.on_conflict as OnConflict | null, fields, false), 'response');
      case 'insertOne':
        return single(this.insert(table, [args.object as Record<string, unknown>], args.on_conflict as OnConflict | null, fields, true), 'row');
      case 'update':
        return single(this.update(table, args, this.whereOf(table, args.where), fields, false), 'response');
      case 'updateByPk':
        return single(this.update(table, args, this.keyCondition(table, args.pk_columns), fields, true), 'row');
      case 'updateMany': {
        const updates = (args.updates ?? []) as Record<string, unknown>[];
        // Each update is its own statement, run in order: a later one sees what an earlier one wrote.
        const statements = updates.map((update) => {
          const compiler = new MutationCompiler(this.writer, this.tables, this.operation);
          return { text: compiler.update(table, update, compiler.whereOf(table, update.where), fields, false), parameters: compiler.parameters };
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

  private insert(table: TableModel, objects: Record<string, unknown>[], onConflict: OnConflict | null, fields: FieldNode[], one: boolean): string {
    const permission = this.writer.admin ? undefined : table.insertPermissions.get(this.writer.role);
    if (!this.writer.admin && (!permission || (permission.backendOnly && !this.writer.backend))) throw notPermitted(`inserting into ${tableText(table.table)}`);
    const presets = permission?.set ?? {};
    const given: ColumnModel[] = [];
    for (const object of objects) {
      if (!isObject(object)) throw badInput(`a row to insert into ${table.typeName} must be an object`);
      for (const name of Object.keys(object)) {
        const column = table.columnsByField.get(name);
        if (!column || (permission && (!permission.columns.has(column.name) || column.name in presets)))
          throw notPermitted(`the column ${name} of ${table.typeName}`);
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
    let updateCheck: BoolExp | undefined;
    let upserting = false;
    if (onConflict) {
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
      if (sets.length === 0) text += ` ON CONFLICT ON CONSTRAINT ${quote(constraint.name)} DO NOTHING`;
      else {
        for (const [column, value] of this.presetColumns(table, updatePresets)) sets.push(`${quote(column.name)} = ${this.bindColumn(column, value)}`);
        const conditions = [
          this.boolExp(onConflict.where ?? {}, table, alias, 'query'),
          update ? this.boolExp(update.filter, table, alias, 'permission') : 'true',
        ];
        text += ` ON CONFLICT ON CONSTRAINT ${quote(constraint.name)} DO UPDATE SET ${sets.join(', ')} WHERE ${conditions.join(' AND ')}`;
        upserting = true;
        updateCheck = update?.check;
      }
    }
    text += ` RETURNING ${alias}.*${upserting ? `, (${alias}.xmax = 0) AS ${quote(INSERTED)}` : ''}`;
    const check = (at: string) => {
      const inserted = permission ? this.boolExp(permission.check, table, at, 'permission') : 'true';
      if (!upserting) return inserted;
      const updated = updateCheck ? this.boolExp(updateCheck, table, at, 'permission') : 'true';
      return `CASE WHEN ${at}.${quote(INSERTED)} THEN ${inserted} ELSE ${updated} END`;
    };
    return this.finish(table, text, fields, one, this.writer.admin ? undefined : check);
  }

  private update(table: TableModel, args: Record<string, unknown>, where: (alias: string) => string, fields: FieldNode[], one: boolean): string {
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

  private remove(table: TableModel, where: (alias: string) => string, fields: FieldNode[], one: boolean): string {
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
   * `WITH "_w" AS (<write>) SELECT <the field's JSON> AS j, <every row passes check> AS ok`: the
   * returned rows are those the role's select permission lets it read.
   */
  private finish(table: TableModel, write: string, fields: FieldNode[], one: boolean, check: ((alias: string) => string) | undefined): string {
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
        if (name === 'affected_rows') pairs.push(`${responseKey}, (SELECT count(*) FROM ${WRITTEN})`);
        else if (name === 'returning') {
          const rows = rowsOf(this.fieldsOf([node.selectionSet], responseType.getFields().returning.type), false);
          pairs.push(`${responseKey}, (SELECT coalesce(json_agg(${rows.json}), '[]'::json) ${rows.from})`);
        }
      }
      json = buildObject(pairs);
    }
    const checked = check ? this.alias() : '';
    const ok = check ? `(SELECT coalesce(bool_and(${check(checked)}), true) FROM ${WRITTEN} AS ${checked})` : 'true';
    return `WITH ${WRITTEN} AS (${write}) SELECT ${json} AS "j", ${ok} AS "ok"`;
  }
}
