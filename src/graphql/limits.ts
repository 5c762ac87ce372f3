import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { GraphQLError, type DocumentNode, type GraphQLSchema, type ValidationRule } from 'graphql';
import { fieldExtensionsEstimator, getComplexity, simpleEstimator, type ComplexityEstimator } from 'graphql-query-complexity';

export interface QueryLimitSettings {
  maxDepth: number;
  maxComplexity: number;
}

/** The limits every operation passes, over HTTP (Apollo) and over WebSocket (graphql-ws) alike. */
export interface QueryLimits {
  /** A validation rule: deeper operations fail validation. */
  depthRule: ValidationRule;
  /** The error for an operation costlier than the limit, or undefined when it is within it. */
  complexityError(document: DocumentNode, operationName: string | null | undefined, variables?: Record<string, unknown>): GraphQLError | undefined;
}

/** Introspection (__schema, __type, __typename) costs nothing, so explorers work under any limit. */
const introspectionEstimator: ComplexityEstimator = ({ field }) => (field.name.startsWith('__') ? 0 : undefined);

export function createQueryLimits(schema: GraphQLSchema, settings: QueryLimitSettings): QueryLimits {
  // graphql-armor's depth rule throws by default (which envelop expects); reported instead, it
  // is an ordinary validation error. Introspection is exempt, fragments count at their use.
  const depthRule = maxDepthRule({
    n: settings.maxDepth,
    ignoreIntrospection: true,
    flattenFragments: true,
    propagateOnRejection: false,
    onReject: [(context, error) => context?.reportError(new GraphQLError(error.message.replace(/^Syntax Error: /, '')))],
  });

  // Cost: 1 per field unless a field declares its own. Apollo's document cache hands back the
  // same DocumentNode for the same query text, so the cost of an operation without variables
  // (which could change it) is computed once.
  const estimators = [introspectionEstimator, fieldExtensionsEstimator(), simpleEstimator({ defaultComplexity: 1 })];
  const costWithoutVariables = new WeakMap<DocumentNode, Map<string, number>>();
  const cost = (document: DocumentNode, operationName: string, variables: Record<string, unknown> | undefined) => {
    const cacheable = !variables || Object.keys(variables).length === 0;
    let byOperation = cacheable ? costWithoutVariables.get(document) : undefined;
    const cached = byOperation?.get(operationName);
    if (cached !== undefined) return cached;
    const computed = getComplexity({ schema, query: document, operationName: operationName || undefined, variables, estimators });
    if (cacheable) {
      if (!byOperation) costWithoutVariables.set(document, (byOperation = new Map()));
      byOperation.set(operationName, computed);
    }
    return computed;
  };

  return {
    depthRule: depthRule as ValidationRule,
    complexityError(document, operationName, variables) {
      let complexity: number;
      try {
        complexity = cost(document, operationName ?? '', variables);
      } catch (error) {
        // Variables that do not coerce: execution reports them as BAD_USER_INPUT next.
        if (error instanceof GraphQLError) return undefined;
        throw error;
      }
      if (complexity <= settings.maxComplexity) return undefined;
      return new GraphQLError(`Query complexity of ${complexity} exceeds the limit of ${settings.maxComplexity}`, {
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED', http: { status: 400 } },
      });
    },
  };
}
