import {
  getArgumentValues,
  getDirectiveValues,
  getNamedType,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  isLeafType,
  isObjectType,
  Kind,
  type GraphQLOutputType,
  typeFromAST,
  type FieldNode,
  type GraphQLObjectType,
  type SelectionSetNode,
} from 'graphql';
import { tableKey } from './tables.catalog';
import { arrayOperand, comparison, type Binder } from './tables.comparisons';
import { isObject, tableText, type BoolExp } from './tables.metadata';
import type { ColumnModel, Operation, PermissionModel, Reader, RelationshipModel, RootKind, TableModel } from './tables.model';
import {
  AGGREGATES,
  badInput,
  buildObject,
  DIRECTIONS,
  joinedOutput,
  key,
  leafOutput,
  notPermitted,
  OBJECT_PAIRS,
  qualified,
  quote,
  SessionValue,
  typeNameValue,
  VariableValue,
  type CompiledStatement,
  type JsonOutput,
} from './tables.sql';

export type { Operation, Reader } from './tables.model';

interface ListArguments {
  where?: BoolExp | null;
  order_by?: Record<string, unknown>[] | Record<string, unknown> | null;
  /** A variable's is bound when the statement runs (VariableValue). */
  limit?: number | VariableValue | null;
  offset?: number | VariableValue | null;
  distinct_on?: string[] | string | null;
}

/**
 * Compiles one root field of the generated API into one statement that builds its whole JSON
 * answer in PostgreSQL: json_build_object per row, json_agg per list, a LATERAL join per
 * relationship, the reader's row filter and limit inside every table it reads.
 */
export class StatementCompiler {
  protected readonly parameters: unknown[] = [];
  private aliases = 0;
  /** The operation's variables as the compiler meets them: a leaf value (or a list of them) as a VariableValue. */
  private marked?: Record<string, unknown>;
  /** The variables whose values the text depends on (read, not only bound). */
  private readonly read = new Set<string>();
  /** Whether the JSON written so far is what GraphQL would write. */
  private output: JsonOutput = 'as-graphql';

  /** `operation` is needed to compile a root field, not a permission's filter alone. */
  constructor(
    protected readonly reader: Reader,
    protected readonly tables: ReadonlyMap<string, TableModel>,
    private readonly given?: Operation,
  ) {}

  protected get operation(): Operation {
    if (!this.given) throw new Error('compiling a root field needs its operation');
    return this.given;
  }

  /** A permission's boolean expression (a filter or a check) alone on the table under alias `_0` (checked when it is created). */
  conditionOf(table: TableModel, condition: BoolExp): CompiledStatement {
    return { text: this.boolExp(condition, table, this.alias(), 'permission'), parameters: this.parameters };
  }

  /**
   * The root field's statement. A variable the statement only binds (a comparison's operand, a
   * primary key, a limit or an offset) is bound from the request's variables when it runs, so the
   * statement serves every value of it; one the text depends on (an ordering, a directive's
   * condition, a `where` object) is read: boundVariables tells them apart.
   */
  compile(table: TableModel, kind: RootKind): CompiledStatement {
    const node = this.operation.fieldNodes[0];
    const rootName = node.name.value;
    const args = this.argumentsOf(this.operation.parentType, node);
    const permission = this.permission(table);
    const opened = this.operation.operation.operation === 'subscription' ? permission?.subscriptionRootFields : permission?.rootFields;
    if (opened && !opened.has(kind)) throw notPermitted(`the root field ${rootName}`);
    const field = this.operation.parentType.getFields()[rootName];
    const selections = this.fieldsOf(
      this.operation.fieldNodes.map((fieldNode) => fieldNode.selectionSet),
      field.type,
    );
    let text: string;
    if (kind === 'selectByPk') {
      if (permission && table.primaryKey.some((column) => !permission.columns.has(column.name))) throw notPermitted(`the root field ${rootName}`);
      const alias = this.alias();
      const conditions = table.primaryKey.map(
        (column) =>
          `${alias}.${quote(column.name)} = ${column.array ? arrayOperand(this.binder, column, args[column.field]) : this.bind(args[column.field], column.sqlType)}`,
      );
      conditions.push(this.permissionFilter(table, alias, permission));
      const { json, joins } = this.rowJson(table, alias, selections);
      text = `SELECT ${json} AS "j" FROM ${qualified(table)} AS ${alias}${joins} WHERE ${conditions.join(' AND ')}`;
    } else if (kind === 'select') {
      text = this.listQuery(table, args as ListArguments, selections, [], permission);
    } else {
      if (permission && !permission.allowAggregations) throw notPermitted(`the root field ${rootName}`);
      text = this.aggregateQuery(table, args as ListArguments, selections, [], permission);
    }
    return { text, parameters: this.parameters, output: this.output };
  }

  /**
   * Relationship fields (`fieldNodes`, one response key) of objects another module answered (an
   * action's output), for all `parents` at once: `owner` stands for their type, its columns the
   * mapped fields read as the target columns' types. One row per parent, in their order.
   */
  compileJoins(owner: TableModel, fieldNodes: readonly FieldNode[], parents: readonly Record<string, unknown>[]): CompiledStatement {
    const fields = this.fieldsOf([{ kind: Kind.SELECTION_SET, selections: fieldNodes }], this.objectType(owner.typeName));
    const values = parents.map((parent) => Object.fromEntries(owner.columns.map((column) => [column.name, parent[column.name] ?? null])));
    const list = this.bind(JSON.stringify(values), 'jsonb');
    const alias = this.alias();
    const columns = owner.columns.map((column) => `("e"."v"->>${key(column.name)})::${column.sqlType} AS ${quote(column.name)}`);
    const { json, joins } = this.rowJson(owner, alias, fields);
    const rows = `SELECT "e"."n", ${columns.join(', ')} FROM jsonb_array_elements(${list}) WITH ORDINALITY AS "e"("v", "n")`;
    return { text: `SELECT ${json} AS "j" FROM (${rows}) AS ${alias}${joins} ORDER BY ${alias}."n"`, parameters: this.parameters };
  }

  /** The variables of the operation this statement binds when it runs and whose values its text does not depend on. */
  boundVariables(): Set<string> {
    return new Set(
      this.parameters.filter((value): value is VariableValue => value instanceof VariableValue && !this.read.has(value.name)).map((value) => value.name),
    );
  }

  /** The compiler's binding, for the comparisons (tables.comparisons.ts). */
  private readonly binder: Binder = {
    bind: (value, cast) => this.bind(value, cast),
    valueOf: (value) => this.valueOf(value),
    readAll: (value) => this.readAll(value),
  };

  /** `json_build_object` of `pairs` (past its argument limit, jsonb's key order, not the document's). */
  private object(pairs: string[]): string {
    if (pairs.length > OBJECT_PAIRS) this.output = 'reshaped';
    return buildObject(pairs);
  }

  /** A leaf's value as PostgreSQL writes it, of GraphQL type `type`. */
  private leaf(type: GraphQLOutputType, column: ColumnModel): void {
    this.output = joinedOutput(this.output, leafOutput(type, column.sqlType));
  }

  protected alias(): string {
    return quote(`_${this.aliases++}`);
  }

  protected bind(value: unknown, cast?: string): string {
    this.parameters.push(value instanceof VariableValue || value instanceof SessionValue ? value : this.readAll(value));
    return `$${this.parameters.length}${cast ? `::${cast}` : ''}`;
  }

  /** The variables as getArgumentValues and getDirectiveValues take them, leaf values marked (VariableValue). */
  private get variables(): Record<string, unknown> {
    if (this.marked) return this.marked;
    const { schema, operation, variableValues } = this.operation;
    this.marked = { ...variableValues };
    for (const definition of operation.variableDefinitions ?? []) {
      const name = definition.variable.name.value;
      const value = variableValues[name];
      const type = typeFromAST(schema, definition.type);
      if (value !== null && value !== undefined && type && isLeafType(getNamedType(type))) this.marked[name] = new VariableValue(name, value);
    }
    return this.marked;
  }

  /** A value the statement's text depends on: a variable's is read (the statement holds for that value only). */
  protected valueOf(value: unknown): unknown {
    if (!(value instanceof VariableValue)) return value;
    this.read.add(value.name);
    return value.value;
  }

  /** `value` with every variable in it read (a list or a JSON value written with variables inside). */
  protected readAll(value: unknown): unknown {
    if (value instanceof VariableValue) return this.valueOf(value);
    if (Array.isArray(value)) return value.map((item) => this.readAll(item));
    // Plain objects only (GraphQL builds literal objects without a prototype): a SessionValue stays one.
    const prototype = isObject(value) ? Object.getPrototypeOf(value) : undefined;
    if (prototype === null || prototype === Object.prototype)
      return Object.fromEntries(Object.entries(value as object).map(([name, item]) => [name, this.readAll(item)]));
    return value;
  }

  /** The reader's permission on `table` (undefined for the admin). */
  protected permission(table: TableModel): PermissionModel | undefined {
    if (this.reader.admin) return undefined;
    const permission = table.permissions.get(this.reader.role);
    if (!permission) throw notPermitted(`the table ${tableText(table.table)}`);
    return permission;
  }

  protected permissionFilter(table: TableModel, alias: string, permission: PermissionModel | undefined): string {
    return permission ? this.boolExp(permission.filter, table, alias, 'permission') : 'true';
  }

  protected visibleColumn(table: TableModel, field: string, permission: PermissionModel | undefined): ColumnModel {
    const column = table.columnsByField.get(field);
    if (!column || (permission && !permission.columns.has(column.name))) throw notPermitted(`the field ${field} of ${table.typeName}`);
    return column;
  }

  /** The fields selected on an object type, fragments and @skip/@include applied, in order. */
  protected fieldsOf(selectionSets: readonly (SelectionSetNode | undefined)[], type: unknown): FieldNode[] {
    let named = type as { ofType?: unknown };
    while (named.ofType) named = named.ofType as { ofType?: unknown };
    const objectType = named as GraphQLObjectType;
    const fields: FieldNode[] = [];
    const visit = (selectionSet: SelectionSetNode | undefined) => {
      for (const selection of selectionSet?.selections ?? []) {
        if (!this.included(selection)) continue;
        if (selection.kind === Kind.FIELD) fields.push(selection);
        else if (selection.kind === Kind.INLINE_FRAGMENT) {
          if (!selection.typeCondition || selection.typeCondition.name.value === objectType.name) visit(selection.selectionSet);
        } else {
          const fragment = this.operation.fragments[selection.name.value];
          if (fragment && fragment.typeCondition.name.value === objectType.name) visit(fragment.selectionSet);
        }
      }
    };
    for (const selectionSet of selectionSets) visit(selectionSet);
    // Fields of one response key are one field (validation made their arguments equal): their selections merge.
    const byKey = new Map<string, FieldNode>();
    for (const field of fields) {
      const key = field.alias?.value ?? field.name.value;
      const seen = byKey.get(key);
      if (!seen) byKey.set(key, field);
      else if (seen.selectionSet && field.selectionSet) {
        byKey.set(key, { ...seen, selectionSet: { ...seen.selectionSet, selections: [...seen.selectionSet.selections, ...field.selectionSet.selections] } });
      }
    }
    return [...byKey.values()];
  }

  private included(node: Parameters<typeof getDirectiveValues>[1]): boolean {
    const skip = getDirectiveValues(GraphQLSkipDirective, node, this.variables);
    if (skip && this.valueOf(skip.if) === true) return false;
    const include = getDirectiveValues(GraphQLIncludeDirective, node, this.variables);
    return !include || this.valueOf(include.if) !== false;
  }

  protected argumentsOf(type: GraphQLObjectType, node: FieldNode): Record<string, unknown> {
    return getArgumentValues(type.getFields()[node.name.value], node, this.variables);
  }

  /** A generated type of the schema the operation runs on. */
  protected objectType(name: string): GraphQLObjectType {
    const type = this.operation.schema.getType(name);
    if (!isObjectType(type)) throw new Error(`the generated type ${name} is missing`);
    return type;
  }

  /** `json_build_object(...)` of one row of `table` under `alias`, and the LATERAL joins it needs. */
  protected rowJson(table: TableModel, alias: string, fields: FieldNode[]): { json: string; joins: string } {
    const type = this.objectType(table.typeName);
    const permission = this.reader.admin ? undefined : table.permissions.get(this.reader.role);
    const pairs: string[] = [];
    let joins = '';
    for (const node of fields) {
      const name = node.name.value;
      const responseKey = node.alias?.value ?? name;
      if (name === '__typename') {
        pairs.push(`${key(responseKey)}, ${typeNameValue(type.name)}`);
        continue;
      }
      const relationship =
        table.relationships.get(name) ?? (name.endsWith('_aggregate') ? table.relationships.get(name.slice(0, -'_aggregate'.length)) : undefined);
      if (relationship && (name === relationship.name || relationship.kind === 'array')) {
        const target = relationship.target;
        const targetPermission = this.permission(target);
        const joined = this.alias();
        const inner = this.alias();
        const mapping = this.mappingConditions(relationship, alias, inner);
        const selected = this.fieldsOf([node.selectionSet], type.getFields()[name].type);
        let query: string;
        if (relationship.kind === 'object') {
          const { json, joins: innerJoins } = this.rowJson(target, inner, selected);
          const conditions = [...mapping, this.permissionFilter(target, inner, targetPermission)];
          query = `SELECT ${json} AS "j" FROM ${qualified(target)} AS ${inner}${innerJoins} WHERE ${conditions.join(' AND ')} LIMIT 1`;
        } else if (name === relationship.name) {
          query = this.listQuery(target, this.argumentsOf(type, node) as ListArguments, selected, mapping, targetPermission, inner);
        } else {
          if (targetPermission && !targetPermission.allowAggregations) throw notPermitted(`the field ${name} of ${table.typeName}`);
          query = this.aggregateQuery(target, this.argumentsOf(type, node) as ListArguments, selected, mapping, targetPermission, inner);
        }
        joins += ` LEFT JOIN LATERAL (${query}) AS ${joined} ON true`;
        pairs.push(`${key(responseKey)}, ${joined}."j"`);
        continue;
      }
      const column = this.visibleColumn(table, name, permission);
      this.leaf(type.getFields()[name].type, column);
      pairs.push(`${key(responseKey)}, ${alias}.${quote(column.name)}`);
    }
    return { json: this.object(pairs), joins };
  }

  private mappingConditions(relationship: RelationshipModel, outer: string, inner: string): string[] {
    return relationship.mapping.map(([local, remote]) => `${inner}.${quote(remote)} = ${outer}.${quote(local)}`);
  }

  /** The rows of `table` (where, order, distinct, limit, offset, the reader's filter), as the subquery `_s` with columns j and o<n>. */
  private rowsQuery(
    table: TableModel,
    args: ListArguments,
    rowJson: ((alias: string) => { json: string; joins: string }) | undefined,
    extraColumns: string[],
    conditions: string[],
    permission: PermissionModel | undefined,
    alias: string,
  ): { text: string; order: string[] } {
    const where = [...conditions, this.permissionFilter(table, alias, permission)];
    if (args.where) where.push(this.boolExp(args.where, table, alias, 'query'));
    const orderBy = args.order_by ? (Array.isArray(args.order_by) ? args.order_by : [args.order_by]) : [];
    const distinctOn = this.readAll(args.distinct_on) as ListArguments['distinct_on'];
    const order = orderBy.flatMap((item) => this.orderExpressions(table, alias, item, permission));
    const distinct = distinctOn ? (Array.isArray(distinctOn) ? distinctOn : [distinctOn]) : [];
    const distinctColumns = distinct.map((field) => `${alias}.${quote(this.visibleColumn(table, field, permission).name)}`);
    if (distinctColumns.length && order.length) {
      const leading = order.slice(0, distinctColumns.length).map((item) => item.expression);
      if (distinctColumns.some((column) => !leading.includes(column))) throw badInput('"distinct_on" columns must match initial "order_by" columns');
    }
    // DISTINCT ON needs an ORDER BY that begins with its columns: theirs when the query gives none.
    const innerOrder = order.length ? order : distinctColumns.map((expression) => ({ expression, direction: 'ASC NULLS LAST' }));
    const columns: string[] = [];
    let joins = '';
    if (rowJson) {
      const built = rowJson(alias);
      columns.push(`${built.json} AS "j"`);
      joins = built.joins;
    }
    innerOrder.forEach((item, index) => columns.push(`${item.expression} AS "o${index}"`));
    columns.push(...extraColumns);
    if (columns.length === 0) columns.push('1 AS "one"');
    let text = `SELECT ${distinctColumns.length ? `DISTINCT ON (${distinctColumns.join(', ')}) ` : ''}${columns.join(', ')} FROM ${qualified(table)} AS ${alias}${joins} WHERE ${where.join(' AND ')}`;
    if (innerOrder.length) text += ` ORDER BY ${innerOrder.map((item) => `${item.expression} ${item.direction}`).join(', ')}`;
    // A variable's limit is bound (PostgreSQL refuses a negative one) unless the permission's caps it.
    const limit = args.limit instanceof VariableValue && typeof permission?.limit !== 'number' ? args.limit : this.valueOf(args.limit);
    const offset = args.offset instanceof VariableValue ? args.offset : this.valueOf(args.offset);
    if (typeof limit === 'number' && limit < 0) throw badInput('"limit" must not be negative');
    if (typeof offset === 'number' && offset < 0) throw badInput('"offset" must not be negative');
    const limits = [limit, permission?.limit].filter((value): value is number => typeof value === 'number');
    if (limit instanceof VariableValue) text += ` LIMIT ${this.bind(limit, 'integer')}`;
    else if (limits.length) text += ` LIMIT ${this.bind(Math.min(...limits), 'integer')}`;
    if (offset instanceof VariableValue || typeof offset === 'number') text += ` OFFSET ${this.bind(offset, 'integer')}`;
    return { text, order: innerOrder.map((item, index) => `"_s"."o${index}" ${item.direction}`) };
  }

  private listQuery(
    table: TableModel,
    args: ListArguments,
    fields: FieldNode[],
    conditions: string[],
    permission: PermissionModel | undefined,
    alias = this.alias(),
  ): string {
    const rows = this.rowsQuery(table, args, (at) => this.rowJson(table, at, fields), [], conditions, permission, alias);
    return `SELECT coalesce(json_agg("_s"."j"${rows.order.length ? ` ORDER BY ${rows.order.join(', ')}` : ''}), '[]'::json) AS "j" FROM (${rows.text}) AS "_s"`;
  }

  /** `<table>_aggregate { aggregate { count sum {...} ... } nodes {...} }` over the same rows as the list. */
  private aggregateQuery(
    table: TableModel,
    args: ListArguments,
    fields: FieldNode[],
    conditions: string[],
    permission: PermissionModel | undefined,
    alias = this.alias(),
  ): string {
    const aggregateType = this.objectType(`${table.typeName}_aggregate`);
    const fieldsType = this.objectType(`${table.typeName}_aggregate_fields`);
    const nodes = fields.filter((node) => node.name.value === 'nodes');
    // Two response keys of `nodes` get the rows of their selections merged: GraphQL keeps each its own.
    if (nodes.length > 1) this.output = 'reshaped';
    const extra: string[] = [];
    const columnAlias = new Map<string, string>();
    const aggregated = (column: ColumnModel) => {
      if (!columnAlias.has(column.name)) {
        const name = `a${columnAlias.size}`;
        columnAlias.set(column.name, name);
        extra.push(`${alias}.${quote(column.name)} AS "${name}"`);
      }
      return `"_s"."${columnAlias.get(column.name)}"`;
    };
    const pairs: string[] = [];
    for (const node of fields) {
      const name = node.name.value;
      const responseKey = key(node.alias?.value ?? name);
      if (name === 'nodes') pairs.push(`${responseKey}, NODES`);
      if (name === '__typename') pairs.push(`${responseKey}, ${typeNameValue(aggregateType.name)}`);
      if (name !== 'aggregate') continue;
      const inner: string[] = [];
      for (const aggregateNode of this.fieldsOf([node.selectionSet], aggregateType.getFields().aggregate.type)) {
        const function_ = aggregateNode.name.value;
        const aggregateKey = key(aggregateNode.alias?.value ?? function_);
        if (function_ === '__typename') {
          inner.push(`${aggregateKey}, ${typeNameValue(fieldsType.name)}`);
          continue;
        }
        if (function_ === 'count') {
          const countArgs = this.argumentsOf(fieldsType, aggregateNode) as { columns?: string[] | null; distinct?: boolean | null };
          const countColumns = (this.readAll(countArgs.columns) ?? []) as string[];
          const columns = countColumns.map((field) => aggregated(this.visibleColumn(table, field, permission)));
          const distinct = this.valueOf(countArgs.distinct) ? 'DISTINCT ' : '';
          const counted = columns.length === 0 ? '*' : `${distinct}${columns.length === 1 ? columns[0] : `(${columns.join(', ')})`}`;
          inner.push(`${aggregateKey}, count(${counted})`);
          continue;
        }
        const subtype = this.objectType(`${table.typeName}_${function_}_fields`);
        const columnPairs = this.fieldsOf([aggregateNode.selectionSet], subtype).map((columnNode) => {
          const columnKey = key(columnNode.alias?.value ?? columnNode.name.value);
          if (columnNode.name.value === '__typename') return `${columnKey}, ${typeNameValue(subtype.name)}`;
          const column = this.visibleColumn(table, columnNode.name.value, permission);
          this.leaf(subtype.getFields()[columnNode.name.value].type, column);
          return `${columnKey}, ${AGGREGATES[function_]}(${aggregated(column)})`;
        });
        inner.push(`${aggregateKey}, ${this.object(columnPairs)}`);
      }
      pairs.push(`${responseKey}, ${this.object(inner)}`);
    }
    const nodeFields = this.fieldsOf(
      nodes.map((node) => node.selectionSet),
      aggregateType.getFields().nodes.type,
    );
    const rows = this.rowsQuery(table, args, nodes.length ? (at) => this.rowJson(table, at, nodeFields) : undefined, extra, conditions, permission, alias);
    const nodesJson = `coalesce(json_agg("_s"."j"${rows.order.length ? ` ORDER BY ${rows.order.join(', ')}` : ''}), '[]'::json)`;
    const json = this.object(pairs.map((pair) => pair.replace(/, NODES$/, `, ${nodesJson}`)));
    // One row even when nothing selected aggregates (`{ __typename }`): a relationship's must not vanish in its LEFT JOIN.
    return `SELECT ${json} AS "j" FROM (${rows.text}) AS "_s" GROUP BY ()`;
  }

  /** The ORDER BY items of one `<table>_order_by` object (through object relationships). */
  private orderExpressions(
    table: TableModel,
    alias: string,
    item: Record<string, unknown>,
    permission: PermissionModel | undefined,
  ): { expression: string; direction: string }[] {
    const items: { expression: string; direction: string }[] = [];
    for (const [field, given] of Object.entries(item)) {
      const value = this.valueOf(given);
      if (value === null || value === undefined) continue;
      const relationship = table.relationships.get(field);
      if (relationship && relationship.kind === 'object' && isObject(value)) {
        const target = relationship.target;
        const targetPermission = this.permission(target);
        for (const nested of this.orderExpressions(target, '"_r"', value, targetPermission)) {
          const inner = this.alias();
          const expression = nested.expression.split('"_r".').join(`${inner}.`);
          const conditions = [...this.mappingConditions(relationship, alias, inner), this.permissionFilter(target, inner, targetPermission)];
          items.push({
            expression: `(SELECT ${expression} FROM ${qualified(target)} AS ${inner} WHERE ${conditions.join(' AND ')} LIMIT 1)`,
            direction: nested.direction,
          });
        }
        continue;
      }
      const aggregated = field.endsWith('_aggregate') ? table.relationships.get(field.slice(0, -'_aggregate'.length)) : undefined;
      if (aggregated?.kind === 'array' && isObject(value)) {
        items.push(...this.aggregateOrder(table, alias, field, aggregated, value));
        continue;
      }
      const column = this.visibleColumn(table, field, permission);
      const direction = DIRECTIONS[String(value)];
      if (!direction) throw badInput(`unknown ordering ${JSON.stringify(value)}`);
      items.push({ expression: `${alias}.${quote(column.name)}`, direction });
    }
    return items;
  }

  /** ORDER BY items of `<rel>_aggregate: {count: asc, max: {column: desc}}`: one correlated aggregate each. */
  private aggregateOrder(
    table: TableModel,
    alias: string,
    field: string,
    relationship: RelationshipModel,
    value: Record<string, unknown>,
  ): { expression: string; direction: string }[] {
    const target = relationship.target;
    const permission = this.permission(target);
    if (permission && !permission.allowAggregations) throw notPermitted(`the field ${field} of ${table.typeName}_order_by`);
    const items: { expression: string; direction: string }[] = [];
    const aggregate = (call: (inner: string) => string, direction: unknown) => {
      const sqlDirection = DIRECTIONS[String(direction)];
      if (!sqlDirection) throw badInput(`unknown ordering ${JSON.stringify(direction)}`);
      const inner = this.alias();
      const conditions = [...this.mappingConditions(relationship, alias, inner), this.permissionFilter(target, inner, permission)];
      items.push({ expression: `(SELECT ${call(inner)} FROM ${qualified(target)} AS ${inner} WHERE ${conditions.join(' AND ')})`, direction: sqlDirection });
    };
    for (const [function_, given] of Object.entries(value)) {
      const order = this.valueOf(given);
      if (order === null || order === undefined) continue;
      if (function_ === 'count') {
        aggregate(() => 'count(*)', order);
        continue;
      }
      if (!AGGREGATES[function_] || !isObject(order)) throw badInput(`unknown aggregate ordering "${function_}"`);
      for (const [columnField, givenDirection] of Object.entries(order)) {
        const direction = this.valueOf(givenDirection);
        if (direction === null || direction === undefined) continue;
        const column = this.visibleColumn(target, columnField, permission);
        aggregate((inner) => `${AGGREGATES[function_]}(${inner}.${quote(column.name)})`, direction);
      }
    }
    return items;
  }

  /**
   * A boolean expression (a query's `where`, keyed by field names, or a permission's filter,
   * keyed by column names and comparing with session variables) as an SQL condition.
   */
  protected boolExp(exp: unknown, table: TableModel, alias: string, mode: 'query' | 'permission'): string {
    if (!isObject(exp)) throw badInput(`a boolean expression of ${table.typeName} must be an object`);
    const parts: string[] = [];
    for (const [field, value] of Object.entries(exp)) {
      if (value === undefined) continue;
      if (value === null) throw badInput(`"${field}" of ${table.typeName}_bool_exp cannot be null`);
      if (field === '_and' || field === '_or') {
        const list = (Array.isArray(value) ? value : [value]).map((item) => this.boolExp(item, table, alias, mode));
        parts.push(list.length === 0 ? (field === '_and' ? 'true' : 'false') : `(${list.join(field === '_and' ? ' AND ' : ' OR ')})`);
      } else if (field === '_not') {
        parts.push(`NOT (${this.boolExp(value, table, alias, mode)})`);
      } else if (field === '_exists' && mode === 'permission') {
        const given = isObject(value) ? value : {};
        const named = isObject(given._table) ? given._table : { name: given._table };
        const target =
          typeof named.name === 'string'
            ? this.tables.get(tableKey({ schema: typeof named.schema === 'string' ? named.schema : 'public', name: named.name }))
            : undefined;
        if (!target) throw badInput('_exists names a table that is not tracked');
        const inner = this.alias();
        parts.push(`EXISTS (SELECT 1 FROM ${qualified(target)} AS ${inner} WHERE ${this.boolExp(given._where ?? {}, target, inner, mode)})`);
      } else if (table.relationships.has(field)) {
        const relationship = table.relationships.get(field)!;
        const target = relationship.target;
        const inner = this.alias();
        const conditions = [...this.mappingConditions(relationship, alias, inner), this.boolExp(value, target, inner, mode)];
        if (mode === 'query') conditions.push(this.permissionFilter(target, inner, this.permission(target)));
        parts.push(`EXISTS (SELECT 1 FROM ${qualified(target)} AS ${inner} WHERE ${conditions.join(' AND ')})`);
      } else {
        const column =
          mode === 'permission'
            ? (table.columns.find((candidate) => candidate.name === field) ?? table.columnsByField.get(field))
            : this.visibleColumn(table, field, this.reader.admin ? undefined : table.permissions.get(this.reader.role));
        if (!column) throw badInput(`no column "${field}" in ${tableText(table.table)}`);
        parts.push(comparison(this.binder, column, `${alias}.${quote(column.name)}`, value, mode));
      }
    }
    return parts.length === 0 ? 'true' : parts.length === 1 ? parts[0] : `(${parts.join(' AND ')})`;
  }
}
