import {
  extendSchema,
  GraphQLError,
  isObjectType,
  parse,
  type FieldNode,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
} from 'graphql';
import type { EntityManager } from 'typeorm';
import { one } from '../../db/sql';
import type { GraphQLContext } from '../../graphql/context';
import type { MetadataRequestContext } from '../../platform/metadata';
import { readCatalog, tableKey } from './tables.catalog';
import { tableText, type QualifiedTable, type TrackedTableEntry } from './tables.metadata';
import { resolveTables, type ColumnModel, type TableModel } from './tables.model';
import { listArguments } from './tables.schema';
import type { CompiledStatement } from './tables.sql';

/*
 * Relationships from object types other modules serve (an action's output type: Hasura's custom
 * type relationships) to tracked tables: checked against the tables' metadata, added to the schema
 * as each view shows the tables, and resolved for all the objects of an answer by one statement.
 */

/** A relationship of an object type to a tracked table, in Hasura's custom types shape. */
export interface TableRelationship {
  name: string;
  type: 'object' | 'array';
  remote_table: QualifiedTable;
  /** Field of the object type -> column of the table. */
  field_mapping: Record<string, string>;
}

/** An object type with relationships to tables: its fields' GraphQL types (references such as `Int!`) by name. */
export interface JoinedType {
  name: string;
  fields: Record<string, string>;
  relationships: readonly TableRelationship[];
}

/** A relationship that cannot be served, and why. */
export interface JoinProblem {
  type: string;
  relationship: string;
  reason: string;
}

/** What another module uses of the tracked tables (the actions module: its relationships). */
export interface TableJoins {
  /** Why each relationship cannot be served by the tracked tables as `manager`'s transaction has them (none: all can). */
  problems(types: readonly JoinedType[], manager: EntityManager): Promise<JoinProblem[]>;
  /**
   * `schema` with a field per relationship whose table `schema` serves (a role's view has only the
   * tables the role may read, so a role without a select permission on the table gets no field),
   * each resolved by one statement for all the objects of the answer that select it.
   */
  extend(schema: GraphQLSchema, types: readonly JoinedType[]): GraphQLSchema;
  /** Calls `check` in the transaction of every change to the tracked tables, before it commits: what it throws refuses the change. */
  beforeTablesChange(check: (context: MetadataRequestContext) => Promise<void>): void;
}

/** What the joins need of the tables service. */
export interface JoinedTables {
  /** The tracked tables the served schema has, by tableKey. */
  served(): ReadonlyMap<string, TableModel>;
  /** Compiles with the operation of `info` for the session of `context`. */
  compile(info: GraphQLResolveInfo, context: GraphQLContext, build: (compiler: { compileJoins: JoinCompiler }) => CompiledStatement): CompiledStatement;
  /** Runs a compiled statement for the request (refusals of values as the caller's mistake). */
  run(statement: CompiledStatement, table: TableModel, info: GraphQLResolveInfo, context: GraphQLContext): Promise<{ j: unknown }[]>;
}

type JoinCompiler = (owner: TableModel, fieldNodes: readonly FieldNode[], parents: readonly Record<string, unknown>[]) => CompiledStatement;

/** The objects waiting for one relationship field of one request, answered together. */
interface Batch {
  parents: Record<string, unknown>[];
  settle: { resolve(value: unknown): void; reject(error: unknown): void }[];
}

/** Whether a field's GraphQL type (`Int!`) can map to a column shown as `scalar` (ID maps to any). */
function fits(reference: string, column: ColumnModel): boolean {
  if (reference.includes('[') || column.array) return false;
  const named = reference.replace(/!/g, '');
  return named === column.scalar || named === 'ID';
}

export class TableJoinsService implements TableJoins {
  private readonly checks: ((context: MetadataRequestContext) => Promise<void>)[] = [];
  private readonly batches = new WeakMap<GraphQLContext, Map<FieldNode, Batch>>();

  constructor(private readonly tables: JoinedTables) {}

  beforeTablesChange(check: (context: MetadataRequestContext) => Promise<void>): void {
    this.checks.push(check);
  }

  /** Registers the checks for a change to the tracked tables in `context` (the tables service's commit). */
  tablesChanging(context: MetadataRequestContext): void {
    for (const [index, check] of this.checks.entries()) context.beforeCommit(`table joins ${index}`, () => check(context));
  }

  async problems(types: readonly JoinedType[], manager: EntityManager): Promise<JoinProblem[]> {
    const wanted = types.flatMap((type) => type.relationships.map((relationship) => relationship.remote_table));
    if (wanted.length === 0) return [];
    const { tables: entries } = (await one<{ tables: TrackedTableEntry[] }>(manager, 'SELECT tables FROM tables_metadata WHERE id = 1'))!;
    const catalog = await readCatalog(manager, [...entries.map((entry) => entry.table), ...wanted]);
    const tracked = new Map(resolveTables(entries, catalog).tables.map((table) => [tableKey(table.table), table]));
    const problems: JoinProblem[] = [];
    for (const type of types) {
      for (const relationship of type.relationships) {
        const problem = (reason: string) => problems.push({ type: type.name, relationship: relationship.name, reason });
        const target = relationship.remote_table;
        const table = tracked.get(tableKey(target));
        if (!table) {
          const exists = catalog.has(tableKey(target));
          problem(exists ? `the table ${tableText(target)} is not tracked` : `no table or view ${tableText(target)} exists`);
          continue;
        }
        for (const [field, columnName] of Object.entries(relationship.field_mapping)) {
          const column = table.columns.find((candidate) => candidate.name === columnName);
          if (!column) problem(`no column "${columnName}" in ${tableText(target)}`);
          else if (!fits(type.fields[field] ?? '', column))
            problem(
              `the field ${type.name}.${field} (${type.fields[field]}) does not match the column ${columnName} of ${tableText(target)} (${column.scalar}): map fields to columns of the same scalar type`,
            );
        }
      }
    }
    return problems;
  }

  extend(schema: GraphQLSchema, types: readonly JoinedType[]): GraphQLSchema {
    const { schema: extended, owners } = withJoinFields(schema, types, this.tables.served());
    for (const owner of owners) {
      const type = extended.getType(owner.typeName);
      if (!isObjectType(type)) continue;
      for (const relationship of owner.relationships.values()) {
        for (const name of [relationship.name, `${relationship.name}_aggregate`]) {
          const field = type.getFields()[name];
          if (field && (name === relationship.name || relationship.kind === 'array'))
            field.resolve = ((source: Record<string, unknown>, _args: unknown, context: GraphQLContext, info: GraphQLResolveInfo) =>
              this.load(owner, relationship.target, source, info, context)) as GraphQLFieldResolver<unknown, unknown>;
        }
      }
    }
    return extended;
  }

  /** One object's value of a relationship field: queued with the other objects of the request selecting the same field. */
  private load(owner: TableModel, target: TableModel, parent: Record<string, unknown>, info: GraphQLResolveInfo, context: GraphQLContext): Promise<unknown> {
    let byField = this.batches.get(context);
    if (!byField) this.batches.set(context, (byField = new Map()));
    const node = info.fieldNodes[0];
    let batch = byField.get(node);
    if (!batch) {
      const started: Batch = (batch = { parents: [], settle: [] });
      byField.set(node, started);
      // Every object of a list is completed in one turn: they are all queued before this runs.
      queueMicrotask(() => {
        byField.delete(node);
        this.flush(owner, target, started, info, context).catch((error: unknown) => {
          for (const { reject } of started.settle) reject(error);
        });
      });
    }
    batch.parents.push(parent);
    return new Promise((resolve, reject) => batch.settle.push({ resolve, reject }));
  }

  private async flush(owner: TableModel, target: TableModel, batch: Batch, info: GraphQLResolveInfo, context: GraphQLContext): Promise<void> {
    const statement = this.tables.compile(info, context, (compiler) => compiler.compileJoins(owner, info.fieldNodes, batch.parents));
    const rows = await this.tables.run(statement, target, info, context);
    const responseKey = info.fieldNodes[0].alias?.value ?? info.fieldNodes[0].name.value;
    if (rows.length !== batch.parents.length) throw new GraphQLError('a relationship statement answered another number of rows than objects');
    for (const [index, { resolve }] of batch.settle.entries()) resolve((rows[index].j as Record<string, unknown>)[responseKey]);
  }
}

/**
 * `schema` with a field per relationship of `types` to a table of `served` that `schema` shows,
 * resolving nothing (the served schema's `extend` and `plinth schema --with-metadata` both use
 * it, so the printed schema is the served one); `owners` are the object types given fields, as
 * tables the compiler can join from.
 */
export function withJoinFields(
  schema: GraphQLSchema,
  types: readonly JoinedType[],
  served: ReadonlyMap<string, TableModel>,
): { schema: GraphQLSchema; owners: TableModel[] } {
  const owners: { owner: TableModel; fields: string[] }[] = [];
  for (const type of types) {
    if (!isObjectType(schema.getType(type.name))) continue;
    const owner = ownerModel(type, served, schema);
    const fields: string[] = [];
    for (const relationship of owner.relationships.values()) {
      const target = relationship.target.typeName;
      if (relationship.kind === 'object') fields.push(`  ${relationship.name}: ${target}`);
      else {
        fields.push(`  ${relationship.name}(${listArguments(target)}): [${target}!]!`);
        if (isObjectType(schema.getType(`${target}_aggregate`)))
          fields.push(`  ${relationship.name}_aggregate(${listArguments(target)}): ${target}_aggregate!`);
      }
    }
    if (fields.length) owners.push({ owner, fields });
  }
  if (owners.length === 0) return { schema, owners: [] };
  return {
    schema: extendSchema(schema, parse(owners.map(({ owner, fields }) => `extend type ${owner.typeName} {\n${fields.join('\n')}\n}`).join('\n\n'))),
    owners: owners.map(({ owner }) => owner),
  };
}

/**
 * The object type `type` as a table the compiler can join from: its mapped fields as columns of
 * the target columns' types, its relationships to the tables `schema` serves (others are left out).
 */
function ownerModel(type: JoinedType, served: ReadonlyMap<string, TableModel>, schema: GraphQLSchema): TableModel {
  const columns = new Map<string, ColumnModel>();
  const owner: TableModel = {
    table: { schema: '', name: type.name },
    typeName: type.name,
    roots: { select: '', selectByPk: '', selectAggregate: '' },
    streamRoot: '',
    rowVersions: false,
    mutationRoots: { insert: '', insertOne: '', update: '', updateByPk: '', updateMany: '', delete: '', deleteByPk: '' },
    constraints: [],
    columns: [],
    columnsByField: columns,
    primaryKey: [],
    relationships: new Map(),
    permissions: new Map(),
    insertPermissions: new Map(),
    updatePermissions: new Map(),
    deletePermissions: new Map(),
  };
  for (const relationship of type.relationships) {
    const target = served.get(tableKey(relationship.remote_table));
    // A table the schema (a role's view) does not show, or one whose columns changed, gives no field.
    if (!target || !isObjectType(schema.getType(target.typeName))) continue;
    const mapping = Object.entries(relationship.field_mapping);
    const targetColumns = mapping.map(([, name]) => target.columns.find((column) => column.name === name));
    if (targetColumns.some((column, index) => !column || !fits(type.fields[mapping[index][0]] ?? '', column))) continue;
    for (const [index, [field]] of mapping.entries()) {
      const column = targetColumns[index]!;
      if (!columns.has(field)) columns.set(field, { name: field, field, scalar: column.scalar, sqlType: column.sqlType, nullable: true, array: false });
    }
    // An owner is never inserted into: the order only completes the model, by the tables' rule.
    const insertOrder = relationship.type === 'object' ? 'beforeParent' : 'afterParent';
    owner.relationships.set(relationship.name, { name: relationship.name, kind: relationship.type, target, mapping, insertOrder });
  }
  owner.columns = [...columns.values()];
  return owner;
}
