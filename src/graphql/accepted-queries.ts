import type { ExecutionResult, GraphQLSchema } from 'graphql';
import type { Metrics } from '../platform/metrics';
import type { OperationExecutor } from './compiled-execution';
import type { GraphQLContext } from './context';
import type { QueryLimits } from './limits';
import { chooseGraphQLMediaType, GRAPHQL_CACHE_CONTROL } from './media-type';
import { ServedSchema } from '../platform/served-schema';
import { rawAnswer } from './raw-root-fields';
import { executionKey, schemaServedTo } from './role-views';

/**
 * On a context whose query this lane ran and that answered with errors (or threw): Apollo's
 * executor hands this outcome back instead of running the query again, and Apollo formats, logs
 * and counts its errors as for any request. A symbol property, since Apollo gives resolvers a
 * shallow copy of the context object.
 */
export const EXECUTED_OUTCOME = Symbol('outcome of the accepted-query lane');

export type ExecutedOutcome = { result: ExecutionResult } | { thrown: unknown };

export type LaneContext = GraphQLContext & { [EXECUTED_OUTCOME]?: ExecutedOutcome };

/** What the lane answered: the headers and body of a 200 response. */
export interface AcceptedQueryAnswer {
  headers: Record<string, string>;
  body: string;
}

/**
 * The accepted-query lane: a POST of a query whose text and operation Apollo has already
 * parsed, validated, resolved and run against the current schema (so the executor kept them)
 * runs again straight through the compiled executor, without Apollo's request pipeline, which
 * costs more than the operation itself. It does what that pipeline does for such a request
 * (the complexity limit, the media type, the metrics, the response Apollo would write) and hands
 * everything else to Apollo: a first sight, a mutation, GET, extensions, a refused session, a
 * complexity over the limit, and any result with errors (whose formatting, logging and status
 * stay Apollo's alone). test/graphql/compiled-execution.test.ts holds the answers byte for byte.
 * A query whose root fields all offer their answer as JSON text (raw-root-fields.ts) is answered
 * with that text, without execution; any that cannot runs through the executor as before.
 */
export class AcceptedQueryLane {
  constructor(
    private readonly executor: OperationExecutor,
    private readonly schema: ServedSchema | GraphQLSchema,
    private readonly limits: QueryLimits,
    private readonly metrics: Metrics,
  ) {}

  /**
   * Answers `body` (a POST's parsed JSON) when it is an accepted query; undefined otherwise.
   * `context` builds the request's context once and throws when the session is refused.
   */
  async answer(body: unknown, accept: string | undefined, context: () => LaneContext): Promise<AcceptedQueryAnswer | undefined> {
    if (!isPlainObject(body) || typeof body.query !== 'string' || body.extensions !== undefined) return undefined;
    const { query, operationName, variables } = body;
    if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return undefined;
    if (variables !== undefined && variables !== null && !isPlainObject(variables)) return undefined;
    const mediaType = chooseGraphQLMediaType(accept);
    if (mediaType === null) return undefined;
    let contextValue: LaneContext;
    try {
      contextValue = context();
    } catch {
      return undefined;
    }
    // The session's view, where Apollo accepted the query for it (apollo.ts, servingGateway).
    const schema = schemaServedTo(this.schema, this.schema instanceof ServedSchema ? this.schema.current : this.schema, contextValue.session);
    const source = executionKey(this.schema, schema, query);
    const accepted = this.executor.accepted(source, operationName, schema);
    if (!accepted || accepted.operation.operation !== 'query') return undefined;
    const name = accepted.operation.name?.value ?? null;
    const variableValues = variables ?? undefined;
    if (this.limits.complexityError(accepted.document, name, variableValues, schema)) return undefined;
    // Root fields that write their own JSON (the generated API's statements) are answered as it comes.
    let text: string | undefined;
    try {
      text = await rawAnswer(schema, accepted.document, accepted.operation, variableValues, contextValue);
    } catch {
      // What failed is run again below, and its error answered as usual.
      text = undefined;
    }
    if (text === undefined) {
      let result: ExecutionResult;
      try {
        result = await this.executor.execute({
          schema,
          document: accepted.document,
          source,
          operation: accepted.operation,
          operationName: operationName ?? undefined,
          variables: variableValues,
          contextValue,
        });
      } catch (thrown) {
        contextValue[EXECUTED_OUTCOME] = { thrown };
        return undefined;
      }
      if (result.errors) {
        contextValue[EXECUTED_OUTCOME] = { result };
        return undefined;
      }
      text = JSON.stringify({ data: result.data, extensions: result.extensions });
    }
    this.metrics.observeGraphQL(name ?? '(anonymous)', 'query', []);
    this.metrics.observeAcceptedQuery();
    return {
      headers: { 'content-type': mediaType, 'cache-control': GRAPHQL_CACHE_CONTROL },
      // As Apollo writes it (runHttpQuery's field order and its trailing newline).
      body: `${text}\n`,
    };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value);
}
