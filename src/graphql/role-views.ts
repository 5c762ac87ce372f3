import { validate, type DocumentNode, type GraphQLError, type GraphQLSchema } from 'graphql';
import { ServedSchema } from '../platform/served-schema';
import type { Session } from '../platform/session';

/** The schema an operation of `session` runs on: its view when `served` narrows it (ServedSchema.viewFor), else `schema`. */
export function schemaServedTo(served: GraphQLSchema | ServedSchema, schema: GraphQLSchema, session: Session): GraphQLSchema {
  return served instanceof ServedSchema ? served.viewFor(schema, session) : schema;
}

/**
 * The executor's key of `source` run on `schema`: a view's operations are kept apart from the
 * whole schema's and other views', so that roles sending one text do not displace each other's.
 * (A query text cannot hold U+0000, so no text is taken for another view's key.)
 */
export function executionKey(served: GraphQLSchema | ServedSchema, schema: GraphQLSchema, source: string): string {
  const view = served instanceof ServedSchema ? served.viewName(schema) : undefined;
  return view === undefined ? source : `${view}\u0000${source}`;
}

const viewErrors = new WeakMap<DocumentNode, WeakMap<GraphQLSchema, readonly GraphQLError[]>>();

/**
 * GraphQL's own validation errors of `document`, valid on the whole schema, on the view `view`: a
 * field the session may not use is refused as an unknown one (`Cannot query field "x" on type
 * "y"`) before anything runs. Kept per document and view, both held only while they are served.
 */
export function viewValidationErrors(view: GraphQLSchema, document: DocumentNode): readonly GraphQLError[] {
  let byView = viewErrors.get(document);
  if (!byView) viewErrors.set(document, (byView = new WeakMap()));
  let errors = byView.get(view);
  if (!errors) byView.set(view, (errors = validate(view, document)));
  return errors;
}
