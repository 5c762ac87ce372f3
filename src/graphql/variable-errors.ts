import { GraphQLError, Kind } from 'graphql';

/**
 * Whether graphql-js refused a variable's value (it does not coerce, a required one is missing)
 * or stopped after 50 such errors (a big input type given garbage reaches it): the caller's
 * mistake, BAD_USER_INPUT. Apollo codes the first kind on HTTP, recognised by these messages (its
 * isBadUserInputGraphQLError), and leaves the limit uncoded; graphql-ws codes neither. Both
 * transports ask this.
 */
export function isVariableValueError(error: unknown): boolean {
  if (!(error instanceof GraphQLError) || error.extensions.code) return false;
  if (error.message.startsWith('Too many errors processing variables')) return true;
  const [node, ...others] = error.nodes ?? [];
  if (node?.kind !== Kind.VARIABLE_DEFINITION || others.length > 0) return false;
  const prefix = `Variable "$${node.variable.name.value}" `;
  return ['has invalid value', 'got invalid value ', 'of required type ', 'of non-null type '].some((rest) => error.message.startsWith(prefix + rest));
}
