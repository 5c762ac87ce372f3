import { Kind, parse, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import { Extensions } from 'type-graphql';

/** Field extension of a mutation whose request may be as large as the upload body limit. */
const ACCEPTS_UPLOAD_BODY = 'acceptsUploadBody';

/**
 * Marks a mutation that carries a file (base64 in a variable): its request may be as large as
 * the upload body limit, where every other GraphQL request keeps GQL_GRAPHQL_BODY_LIMIT.
 */
export const AcceptsUploadBody = () => Extensions({ [ACCEPTS_UPLOAD_BODY]: true });

/**
 * Whether a GraphQL request body is one operation made only of upload mutations (and
 * __typename): only such a request may be larger than the ordinary body limit. Anything else,
 * unparsable or batched included, is not.
 */
export function isUploadRequest(schema: GraphQLSchema, body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const { query, operationName } = body as { query?: unknown; operationName?: unknown };
  if (typeof query !== 'string') return false;
  const fields = schema.getMutationType()?.getFields() ?? {};
  let operations: OperationDefinitionNode[];
  try {
    operations = parse(query, { noLocation: true }).definitions.filter(
      (definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION,
    );
  } catch {
    return false;
  }
  const operation =
    typeof operationName === 'string' && operationName
      ? operations.find((candidate) => candidate.name?.value === operationName)
      : operations.length === 1
        ? operations[0]
        : undefined;
  if (!operation || operation.operation !== 'mutation') return false;
  return operation.selectionSet.selections.every((selection) => {
    if (selection.kind !== Kind.FIELD) return false;
    const name = selection.name.value;
    return name === '__typename' || fields[name]?.extensions[ACCEPTS_UPLOAD_BODY] === true;
  });
}
