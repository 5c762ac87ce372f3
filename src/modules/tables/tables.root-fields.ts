import { GraphQLError, visit, type ASTNode, type FieldNode, type FragmentDefinitionNode, type OperationDefinitionNode } from 'graphql';
import { types, type CustomTypesConfig } from 'pg';
import type pg from 'pg';
import { ADMIN_ROLE } from '../../common/roles';
import type { GraphQLContext } from '../../graphql/context';
import type { RawFieldRequest } from '../../graphql/raw-root-fields';
import type { Session } from '../../platform/session';
import { StatementCompiler, type Operation } from './tables.compiler';
import type { RootKind, TableModel } from './tables.model';
import { asInputError, boundValues, changedUnderMetadata, type CompiledStatement } from './tables.sql';

/** Statements kept per root field and role, one per set of the values the text depends on (an ordering, a `where` object given as a variable). */
const PLANS_PER_FIELD = 16;
/** PostgreSQL's json type: the statement's one column, kept as the text PostgreSQL wrote. */
const JSON_OID = 114;
const AS_TEXT: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === JSON_OID ? (text: string) => text : types.getTypeParser(oid, format)) as CustomTypesConfig['getTypeParser'],
};
/**
 * How PostgreSQL writes a non-finite float or numeric in JSON ("NaN", "Infinity", "-Infinity"),
 * which GraphQL's Float refuses: a text holding one (even inside a string) is left to GraphQL.
 */
const NON_FINITE = /"(?:NaN|-?Infinity)"/;

/** A compiled statement, and what a request must bring to run it. */
interface Plan {
  table: TableModel;
  statement: CompiledStatement;
  /** The variables the statement binds when it runs (never null in a request it serves). */
  bound: ReadonlySet<string>;
  /** variablesKey of the compiling request: a request with the same key gets the same statement. */
  key: string;
}

/** The plans of one root field of an operation: the variables it refers to, and its plans per role (most recent first). */
interface FieldPlans {
  variables: string[];
  byRole: Map<string, Plan[]>;
}

/** The unrestricted admin: the admin secret, as role admin (a token's role admin is an ordinary role). */
export function isAdmin(session: Session): boolean {
  return session.viaAdminSecret && session.role === ADMIN_ROLE;
}

/**
 * The generated root fields' statements: compiled once per (operation, field, role), run through
 * the pool, answered as parsed values (for GraphQL to complete) or as PostgreSQL's JSON text
 * (the raw answer, where the statement's JSON is what GraphQL would write).
 */
export class RootFieldStatements {
  /** Statements compiled once, per operation of a parsed document (kept as long as the document is), root field and role. */
  private readonly plans = new WeakMap<OperationDefinitionNode, Map<FieldNode, FieldPlans>>();

  constructor(
    private readonly pool: pg.Pool,
    /** The tracked tables served now, by tableKey. */
    private readonly tables: () => ReadonlyMap<string, TableModel>,
    /** The error of a statement that met a table or column gone since the metadata was read (which it has read again). */
    private readonly staleCatalog: (table: TableModel, error: Error) => GraphQLError,
  ) {}

  /** One root field's answer, by its statement (whose arguments the compiler reads from the operation, its variables marked). */
  async select(table: TableModel, kind: RootKind, operation: Operation, context: GraphQLContext): Promise<unknown> {
    const rows = await this.run(this.compile(table, kind, operation, context.session), table, operation, context);
    return kind === 'selectByPk' ? (rows[0]?.j ?? null) : rows[0].j;
  }

  /** Runs a statement for a request: a value PostgreSQL refuses is the caller's mistake; a table changed under its metadata is read again. */
  async run(statement: CompiledStatement, table: TableModel, operation: Pick<Operation, 'variableValues'>, context: GraphQLContext): Promise<{ j: unknown }[]> {
    try {
      return (await this.pool.query<{ j: unknown }>(statement.text, boundValues(statement, context.session.variables, operation.variableValues))).rows;
    } catch (error) {
      if (changedUnderMetadata(error)) throw this.staleCatalog(table, error as Error);
      throw asInputError(error);
    }
  }

  /**
   * The same answer as PostgreSQL's JSON text, when the statement writes what GraphQL would (its
   * `output`) and PostgreSQL answers without an error; undefined otherwise, for GraphQL to run
   * the field and give the answer or the error as it does.
   */
  async selectJson(table: TableModel, kind: RootKind, request: RawFieldRequest): Promise<string | undefined> {
    const { session } = request.contextValue as GraphQLContext;
    let statement: CompiledStatement;
    let rows: { j: string | null }[];
    try {
      statement = this.compile(table, kind, request, session);
      if (statement.output === 'reshaped') return undefined;
      const values = boundValues(statement, session.variables, request.variableValues);
      ({ rows } = await this.pool.query<{ j: string | null }>({ text: statement.text, values, types: AS_TEXT }));
    } catch {
      return undefined;
    }
    const text = kind === 'selectByPk' ? (rows[0]?.j ?? 'null') : rows[0].j!;
    return statement.output === 'floats' && NON_FINITE.test(text) ? undefined : text;
  }

  /**
   * The statement of one root field for the caller's role, compiled once per (operation, field,
   * role) and shared by every session of the role: its session values and the variables it only
   * binds are bound when it runs, so a repeated query is a cache hit whatever those values. A
   * variable the text depends on (read by the compiler) keys the plan by its value, a few plans
   * per field at most.
   */
  compile(table: TableModel, kind: RootKind, operation: Operation, session: Session): CompiledStatement {
    const admin = isAdmin(session);
    let fields = this.plans.get(operation.operation);
    if (!fields) this.plans.set(operation.operation, (fields = new Map()));
    const node = operation.fieldNodes[0];
    let field = fields.get(node);
    if (!field) fields.set(node, (field = { variables: referencedVariables(operation.fieldNodes, operation.fragments), byRole: new Map() }));
    // '' is the admin's: a role is never empty.
    const role = admin ? '' : session.role;
    const plans = field.byRole.get(role) ?? [];
    for (const plan of plans)
      if (plan.table === table && plan.key === variablesKey(field.variables, plan.bound, operation.variableValues)) return plan.statement;
    const compiler = new StatementCompiler({ role: session.role, admin }, this.tables(), operation);
    const statement = compiler.compile(table, kind);
    const bound = compiler.boundVariables();
    // Plans of an earlier metadata (another table model) go; the least recent beyond the bound too.
    const kept = plans.filter((plan) => plan.table === table).slice(0, PLANS_PER_FIELD - 1);
    field.byRole.set(role, [{ table, statement, bound, key: variablesKey(field.variables, bound, operation.variableValues) }, ...kept]);
    return statement;
  }
}

/** The variables the fields (with the fragments they spread) refer to, each once. */
function referencedVariables(nodes: readonly FieldNode[], fragments: Record<string, FragmentDefinitionNode>): string[] {
  const pending: ASTNode[] = [...nodes];
  const spread = new Set<string>();
  const names = new Set<string>();
  for (let node = pending.pop(); node; node = pending.pop()) {
    visit(node, {
      Variable(variable) {
        names.add(variable.name.value);
      },
      FragmentSpread(fragmentSpread) {
        const name = fragmentSpread.name.value;
        if (!spread.has(name) && fragments[name]) {
          spread.add(name);
          pending.push(fragments[name]);
        }
      },
    });
  }
  return [...names];
}

/**
 * What a plan depends on of a request's variables: for each variable the field refers to, its
 * value (JSON) when the text depends on it, or only that it is given when the statement binds it.
 */
function variablesKey(names: readonly string[], bound: ReadonlySet<string>, values: Readonly<Record<string, unknown>>): string {
  let key = '';
  for (const name of names) {
    const value = values[name];
    // JSON text never holds a raw control character, so these cannot be mistaken for a value.
    if (bound.has(name)) key += value === null || value === undefined ? '\u0000' : '';
    else key += JSON.stringify(value) ?? '\u0001';
    key += '\u0002';
  }
  return key;
}
