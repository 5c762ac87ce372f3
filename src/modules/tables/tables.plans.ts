import { visit, type ASTNode, type FieldNode, type FragmentDefinitionNode, type GraphQLResolveInfo, type OperationDefinitionNode } from 'graphql';
import { StatementCompiler, type Reader } from './tables.compiler';
import type { RootKind, TableModel } from './tables.model';
import type { CompiledStatement } from './tables.sql';

/** Statements kept per root field and role, one per set of the values the text depends on (an ordering, a `where` object given as a variable). */
const PLANS_PER_FIELD = 16;

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

/** Statements compiled once, per operation of a parsed document (kept as long as the document is), root field and role. */
export class StatementPlans {
  private readonly plans = new WeakMap<OperationDefinitionNode, Map<FieldNode, FieldPlans>>();

  /**
   * The statement of one root field for the caller's role, compiled once per (operation, field,
   * role) and shared by every session of the role: its session values and the variables it only
   * binds are bound when it runs, so a repeated query is a cache hit whatever those values. A
   * variable the text depends on (read by the compiler) keys the plan by its value, a few plans
   * per field at most.
   */
  statement(table: TableModel, kind: RootKind, info: GraphQLResolveInfo, reader: Reader, tables: ReadonlyMap<string, TableModel>): CompiledStatement {
    let fields = this.plans.get(info.operation);
    if (!fields) this.plans.set(info.operation, (fields = new Map()));
    const node = info.fieldNodes[0];
    let field = fields.get(node);
    if (!field) fields.set(node, (field = { variables: referencedVariables(info.fieldNodes, info.fragments), byRole: new Map() }));
    // '' is the admin's: a role is never empty.
    const role = reader.admin ? '' : reader.role;
    const plans = field.byRole.get(role) ?? [];
    for (const plan of plans) if (plan.table === table && plan.key === variablesKey(field.variables, plan.bound, info.variableValues)) return plan.statement;
    const compiler = new StatementCompiler(reader, tables, info);
    const statement = compiler.compile(table, kind);
    const bound = compiler.boundVariables();
    // Plans of an earlier metadata (another table model) go; the least recent beyond the bound too.
    const kept = plans.filter((plan) => plan.table === table).slice(0, PLANS_PER_FIELD - 1);
    field.byRole.set(role, [{ table, statement, bound, key: variablesKey(field.variables, bound, info.variableValues) }, ...kept]);
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
