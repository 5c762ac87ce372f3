import { Kind, type DocumentNode, type GraphQLResolveInfo, type OperationDefinitionNode } from 'graphql';
import type { GraphQLContext } from '../../graphql/context';
import { viewValidationErrors } from '../../graphql/role-views';
import type { ServedSchema } from '../../platform/served-schema';
import { tableKey } from './tables.catalog';
import type { LiveRequest } from './tables.live-queries';
import { tableText } from './tables.metadata';
import type { RootKind, TableModel } from './tables.model';
import type { RootFieldStatements } from './tables.root-fields';
import { boundValues, qualified } from './tables.sql';

/** What planning a live query reads of the served metadata: the models by key and the tables in the schema now. */
export interface LivePlanningSource {
  schema: ServedSchema;
  statements: RootFieldStatements;
  byKey(): Map<string, TableModel>;
  inSchema(): readonly TableModel[];
}

/**
 * A live query's statement under the metadata served now, with its values and the tracked tables
 * its text reads, and how to plan it again after the next change. Planned again (`replanned`), the
 * document must still be valid in the role's schema (a field or argument its permission no longer
 * opens is thrown), and the statement is compiled against the table's new model.
 */
export function liveRequest(
  source: LivePlanningSource,
  table: TableModel,
  kind: RootKind,
  info: GraphQLResolveInfo,
  context: GraphQLContext,
  replanned = false,
): LiveRequest {
  const model = replanned ? source.byKey().get(tableKey(table.table)) : table;
  if (!model) throw new Error(`the table ${tableText(table.table)} is no longer tracked`);
  if (replanned) {
    const view = source.schema.viewFor(source.schema.current, context.session);
    if (viewValidationErrors(view, documentOf(info.operation, info.fragments)).length > 0) throw new Error('the document no longer fits the role');
  }
  const statement = source.statements.compile(model, kind, info, context.session);
  const values = boundValues(statement, context.session.variables, info.variableValues);
  const reads = source
    .inSchema()
    .filter((candidate) => statement.text.includes(qualified(candidate)))
    .map((candidate) => candidate.table);
  return { statement, values, tables: reads, replan: () => liveRequest(source, model, kind, info, context, true) };
}

/** The operation's document, one per operation (subscribers of one text share it, and its validation per view). */
const documents = new WeakMap<OperationDefinitionNode, DocumentNode>();

function documentOf(operation: OperationDefinitionNode, fragments: GraphQLResolveInfo['fragments']): DocumentNode {
  let document = documents.get(operation);
  if (!document) documents.set(operation, (document = { kind: Kind.DOCUMENT, definitions: [operation, ...Object.values(fragments)] }));
  return document;
}
