import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type DocumentNode,
  type GraphQLSchema,
  type ParseOptions,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import { fieldExtensionsEstimator, getComplexity, simpleEstimator, type ComplexityEstimator } from 'graphql-query-complexity';
import { LRUCache } from 'lru-cache';
import { jsonDeeperThan } from '../common/json-depth';
import { countTakenIn } from '../platform/text-caches';

export interface QueryLimitSettings {
  maxDepth: number;
  maxComplexity: number;
  /** Lexical tokens a document may have; parsing stops past them (graphql-js maxTokens). */
  maxTokens: number;
  /** Bytes of query text; longer documents are refused before parsing. */
  maxDocumentBytes: number;
  maxAliases: number;
  maxRootFields: number;
  /** How deep objects and arrays may nest in an operation's variables (REQUEST_MAX_JSON_DEPTH). */
  maxVariablesDepth: number;
}

/**
 * The limits every operation passes, over HTTP (Apollo) and over WebSocket (graphql-ws) alike.
 * Together they bound the work and memory one document can cost: its size and token count bound
 * parsing, and validation then runs over a bounded tree.
 */
export interface QueryLimits {
  parseOptions: ParseOptions;
  maxDocumentBytes: number;
  /** Validation rules added to graphql-js's own: depth, aliases, root fields. */
  rules: ValidationRule[];
  /**
   * The error for an operation whose variables nest deeper than the limit (checked first: the cost
   * is computed from them, recursively) or that is costlier than the limit; undefined when it is
   * within both. `schema`: the one the operation runs on, when it is not the one the limits were made with.
   */
  complexityError(
    document: DocumentNode,
    operationName: string | null | undefined,
    variables?: Record<string, unknown>,
    schema?: GraphQLSchema,
  ): GraphQLError | undefined;
}

/**
 * Bytes of computed costs kept (their keys: a document's number, the operation's name, the
 * variables' JSON), and the longest variables' JSON kept in a key. One budget for all documents:
 * with a count per document, a short document could hold many long keys.
 */
const COST_CACHE_BYTES = 2 * 1024 * 1024;
const COST_CACHE_MAX_VARIABLES_LENGTH = 2048;
/** An entry's bytes besides its key's characters (two bytes each at most). */
const COST_CACHE_ENTRY_BYTES = 100;

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
  // same DocumentNode for the same query text, so the cost of an operation is computed once per
  // document, operation and variables (which can change it: a page size, an @include): walking
  // the document costs far more than the variables' JSON.
  const estimators = [introspectionEstimator, fieldExtensionsEstimator(), simpleEstimator({ defaultComplexity: 1 })];
  const documentNumbers = new WeakMap<DocumentNode, number>();
  let documentsNumbered = 0;
  const costs = new LRUCache<string, number>({
    maxSize: COST_CACHE_BYTES,
    sizeCalculation: countTakenIn((_cost, key) => COST_CACHE_ENTRY_BYTES + 2 * key.length),
  });
  const cost = (document: DocumentNode, operationName: string, variables: Record<string, unknown> | undefined, operationSchema: GraphQLSchema) => {
    const variablesText = variables && Object.keys(variables).length > 0 ? JSON.stringify(variables) : '';
    const cacheable = variablesText.length <= COST_CACHE_MAX_VARIABLES_LENGTH;
    let key: string | undefined;
    if (cacheable) {
      let number = documentNumbers.get(document);
      if (number === undefined) documentNumbers.set(document, (number = documentsNumbered++));
      key = `${number}\u0000${operationName}\u0000${variablesText}`;
      const cached = costs.get(key);
      if (cached !== undefined) return cached;
    }
    const computed = getComplexity({ schema: operationSchema, query: document, operationName: operationName || undefined, variables, estimators });
    if (key !== undefined) costs.set(key, computed);
    return computed;
  };

  const aliasesRule = maxAliasesRule({
    n: settings.maxAliases,
    propagateOnRejection: false,
    onReject: [(context, error) => context?.reportError(new GraphQLError(error.message.replace(/^Syntax Error: /, '')))],
  });

  return {
    parseOptions: { maxTokens: settings.maxTokens },
    maxDocumentBytes: settings.maxDocumentBytes,
    rules: [depthRule as ValidationRule, aliasesRule as ValidationRule, maxRootFieldsRule(settings.maxRootFields)],
    complexityError(document, operationName, variables, operationSchema = schema) {
      if (jsonDeeperThan(variables, settings.maxVariablesDepth)) {
        return new GraphQLError(`The variables nest more than ${settings.maxVariablesDepth} levels deep (REQUEST_MAX_JSON_DEPTH)`, {
          extensions: { code: JSON_TOO_DEEP, http: { status: 400 } },
        });
      }
      let complexity: number;
      try {
        complexity = cost(document, operationName ?? '', variables, operationSchema);
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

export const DOCUMENT_TOO_LARGE = 'DOCUMENT_TOO_LARGE';
/** The code of a request whose JSON (GraphQL variables, a REST body) nests deeper than REQUEST_MAX_JSON_DEPTH. */
export const JSON_TOO_DEEP = 'JSON_TOO_DEEP';

/** The error for query text longer than the limit, before any of it is parsed. */
export function documentSizeError(query: string, limits: QueryLimits): GraphQLError | undefined {
  // A character takes at most 3 bytes in UTF-8 (a surrogate pair 4 for 2): skip counting short texts.
  if (query.length * 3 <= limits.maxDocumentBytes) return undefined;
  const bytes = Buffer.byteLength(query);
  if (bytes <= limits.maxDocumentBytes) return undefined;
  return new GraphQLError(`The document is ${bytes} bytes; the limit is ${limits.maxDocumentBytes} (GQL_GRAPHQL_MAX_DOCUMENT_BYTES)`, {
    extensions: { code: DOCUMENT_TOO_LARGE },
  });
}

/** Operations may select at most `limit` root fields (fragments at the root count by their fields). */
function maxRootFieldsRule(limit: number): ValidationRule {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(operation) {
      const count = countFields(context, operation.selectionSet, new Set());
      if (count > limit) {
        context.reportError(new GraphQLError(`Operation selects ${count} root fields; the limit is ${limit}`, { nodes: [operation] }));
      }
    },
  });
}

function countFields(context: ValidationContext, selectionSet: SelectionSetNode, seenFragments: Set<string>): number {
  let count = 0;
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) count += 1;
    else if (selection.kind === Kind.INLINE_FRAGMENT) count += countFields(context, selection.selectionSet, seenFragments);
    else if (!seenFragments.has(selection.name.value)) {
      // A fragment spread twice at the root selects its fields once; a cycle is another rule's error.
      seenFragments.add(selection.name.value);
      const fragment = context.getFragment(selection.name.value);
      if (fragment) count += countFields(context, fragment.selectionSet, seenFragments);
    }
  }
  return count;
}
