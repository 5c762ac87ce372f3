import {
  execute,
  GraphQLError,
  getVariableValues,
  Kind,
  visit,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import { documentHeapBytes } from './document-heap';
import { hasRecursiveInputVariable } from './recursive-inputs';

export interface CompiledExecutionSettings {
  /** Off: every operation runs through graphql-js's execute. */
  enabled: boolean;
  /**
   * Bytes of heap the kept documents and compiled operations may take (least recently used go
   * first); an operation whose compiled form would take its text's entry past a quarter of it is
   * run by graphql-js instead.
   */
  cacheBytes: number;
}

/** What an operation needs to run: Apollo's request context carries all of it. */
export interface ExecutionRequest {
  schema: GraphQLSchema;
  document: DocumentNode;
  /** The query text: the cache key, so that a document parsed again (Apollo's store off or full) compiles once. */
  source: string;
  operation: OperationDefinitionNode | undefined;
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
  contextValue: unknown;
}

/** An operation as graphql-jit compiled it. */
interface CompiledOperation {
  query: CompiledQuery;
  /**
   * Variables without a default that stand for an input object's field: left out of a request,
   * graphql-js gives the field its own default, graphql-jit null (0.8.9), so graphql-js runs such a request.
   */
  fieldVariables: string[];
}

/** An operation this executor has run: Apollo had parsed, validated and resolved it. */
interface RunOperation {
  operation: OperationDefinitionNode;
  /**
   * Undefined: run once, through graphql-js, and compiled if it runs again; null: graphql-js runs
   * it (graphql-jit cannot compile it, or its compiled form is too big to keep).
   */
  compiled: CompiledOperation | null | undefined;
  /** What the operation takes on the heap (a compiled one: estimated from its generated code). */
  bytes: number;
}

/** Per query text: the schema it was compiled against, its document and, per operation name, what ran. */
interface CacheEntry {
  schema: GraphQLSchema;
  document: DocumentNode;
  operations: Map<string, RunOperation>;
  /** The document's heap bytes and its operations': the entry's size in the cache. */
  bytes: number;
}

/** A query Apollo accepted before, as the accepted-query lane runs it again (src/graphql/accepted-queries.ts). */
export interface AcceptedOperation {
  document: DocumentNode;
  operation: OperationDefinitionNode;
}

/**
 * Runs queries and mutations, and subscriptions' events, as graphql-jit compiled them, once per
 * query text and operation, and anything graphql-jit cannot compile through graphql-js. An
 * operation's first run goes through graphql-js, and it is compiled when it runs again: compiling
 * generates code (heap, and the compiler's native memory) that only a repeated operation pays
 * back, and texts sent once are what a hostile or generated client sends. Answers are the same as
 * graphql-js's: variables are coerced by graphql-js first, so a bad variable gets graphql-js's
 * error, and a test runs every operation of the suite through both (test/graphql/compiled-execution.test.ts).
 */
export class OperationExecutor {
  private readonly cache: LRUCache<string, CacheEntry> | undefined;

  constructor(settings: CompiledExecutionSettings) {
    // Counted in bytes, not entries: query texts are the caller's, and one compiled operation
    // takes from a few KiB to several MiB (docs/decisions.md, "Memory under hostile input").
    this.cache = settings.enabled
      ? new LRUCache({ maxSize: settings.cacheBytes, maxEntrySize: Math.max(1, Math.floor(settings.cacheBytes / 4)), sizeCalculation: (entry) => entry.bytes })
      : undefined;
  }

  /** Heap bytes the kept documents and compiled operations take, as the cache counts them. */
  get cachedBytes(): number {
    return this.cache?.calculatedSize ?? 0;
  }

  /** Compiled operations kept now (for tests and metrics). */
  get compiledOperations(): number {
    let count = 0;
    for (const entry of this.cache?.values() ?? []) for (const { compiled } of entry.operations.values()) if (compiled) count++;
    return count;
  }

  /**
   * The document and operation of `source` under `operationName` (null or undefined: its only
   * operation) when this executor has run it against `schema`, so Apollo accepted it then.
   */
  accepted(source: string, operationName: string | null | undefined, schema: GraphQLSchema): AcceptedOperation | undefined {
    // An empty name names no operation (Apollo refuses it), unlike a name left out.
    const entry = operationName === '' ? undefined : this.cache?.get(source);
    if (!entry || entry.schema !== schema) return undefined;
    const run = entry.operations.get(operationName ?? '');
    return run && { document: entry.document, operation: run.operation };
  }

  execute(request: ExecutionRequest): Promise<ExecutionResult> | ExecutionResult {
    if (request.operation?.operation === 'subscription') return this.interpret(request);
    return this.run(request, this.compiled(request), undefined);
  }

  /**
   * One event of a subscription: its document's selection executed over the event as root value,
   * as graphql-js's subscribe maps each event (graphql-jit's own subscribe drops fields of an
   * event, see docs/decisions.md).
   */
  executeEvent(request: ExecutionRequest, event: unknown): Promise<ExecutionResult> | ExecutionResult {
    return this.run(request, this.compiled(request), event);
  }

  private run(request: ExecutionRequest, compiled: CompiledOperation | undefined, rootValue: unknown): Promise<ExecutionResult> | ExecutionResult {
    if (!compiled) return this.interpret(request, rootValue);
    const variables = request.variables ?? {};
    if (compiled.fieldVariables.some((name) => !Object.hasOwn(variables, name))) return this.interpret(request, rootValue);
    const definitions = request.operation!.variableDefinitions;
    if (definitions && definitions.length > 0) {
      const coerced = getVariableValues(request.schema, definitions, variables);
      if (coerced.errors) return { errors: coerced.errors };
    }
    const result = compiled.query.query(rootValue, request.contextValue, variables);
    // graphql-jit coerces the variables again, without input fields' defaults (a left-out
    // `send_invitations: Boolean! = false` is refused): what graphql-js accepted, graphql-js runs.
    if (!(result instanceof Promise) && result.errors && result.data === undefined) return this.interpret(request, rootValue);
    return result instanceof Promise ? result.then(withGraphQLJsErrors) : withGraphQLJsErrors(result);
  }

  private interpret(request: ExecutionRequest, rootValue?: unknown): Promise<ExecutionResult> | ExecutionResult {
    return execute({
      schema: request.schema,
      document: request.document,
      rootValue,
      contextValue: request.contextValue,
      variableValues: request.variables,
      operationName: request.operationName,
    });
  }

  /** The compiled operation, or undefined where graphql-js is to run it. */
  private compiled(request: ExecutionRequest): CompiledOperation | undefined {
    // Without a resolved operation graphql-js reports why (no such name, several without one);
    // without the text there is no key that tells documents apart.
    if (!this.cache || !request.operation || !request.source) return undefined;
    let entry = this.cache.get(request.source);
    if (!entry || entry.schema !== request.schema) {
      entry = { schema: request.schema, document: request.document, operations: new Map(), bytes: documentHeapBytes(request.document) };
    }
    // Apollo found no operation for an empty name; the name is never '' here.
    const key = request.operationName ?? '';
    const run = entry.operations.get(key);
    if (run === undefined) {
      // First sight: remembered (the accepted-query lane knows it from then on), run by graphql-js.
      entry.operations.set(key, { operation: request.operation, compiled: undefined, bytes: INTERPRETED_OPERATION_BYTES });
      entry.bytes += INTERPRETED_OPERATION_BYTES;
      this.keep(request.source, entry);
      return undefined;
    }
    if (run.compiled !== undefined) return run.compiled ?? undefined;
    const compiled = compile(request);
    // Too big to keep beside the rest: run this once, then graphql-js runs it rather than compiling it again each time.
    const kept = entry.bytes - run.bytes + compiled.bytes <= this.cache.maxEntrySize ? compiled : INTERPRETED;
    entry.bytes += kept.bytes - run.bytes;
    run.compiled = kept.compiled;
    run.bytes = kept.bytes;
    this.keep(request.source, entry);
    return compiled.compiled ?? undefined;
  }

  /**
   * Sets the entry again so that the cache counts its new size (one past maxEntrySize is dropped):
   * as another object, since the cache recounts only a value that changed.
   */
  private keep(source: string, entry: CacheEntry): void {
    this.cache!.set(source, { ...entry });
  }
}

/**
 * Heap bytes per character of the code graphql-jit generates, once the compiled operation has
 * run (its closures, bytecode and resolve infos): the top of the range measured for operations
 * from a few fields to thousands (docs/decisions.md, "Memory under hostile input").
 */
const HEAP_BYTES_PER_GENERATED_CHARACTER = 6;
/** What an operation graphql-js runs costs in the cache: its entry in the operations map. */
const INTERPRETED_OPERATION_BYTES = 200;
/**
 * graphql-jit 0.8.9 hands back the code it generated under this name when asked (`debug`); the
 * code is kept anyway (a function's source stays with it), so asking costs nothing. Its length
 * is how big the compiled operation is: the query text says little (a short text can spread a
 * fragment into thousands of fields). A test fails if an upgrade loses it (compiled-execution.test.ts).
 */
const GENERATED_CODE = '__DO_NOT_USE_THIS_OR_YOU_WILL_BE_FIRED_compilation';
const WITH_GENERATED_CODE = { debug: true } as Parameters<typeof compileQuery>[3];

/** An operation graphql-js runs from now on. */
const INTERPRETED = { compiled: null, bytes: INTERPRETED_OPERATION_BYTES } as const;

function compile(request: ExecutionRequest): Pick<RunOperation, 'compiled' | 'bytes'> {
  if (hasRecursiveInputVariable(request.schema, request.operation!)) return INTERPRETED;
  try {
    const compiled = compileQuery(request.schema, request.document, request.operationName ?? undefined, WITH_GENERATED_CODE);
    if (!isCompiledQuery(compiled)) return INTERPRETED;
    const code = (compiled as unknown as Record<string, unknown>)[GENERATED_CODE];
    delete (compiled as unknown as Record<string, unknown>)[GENERATED_CODE];
    const codeLength = typeof code === 'string' ? code.length : 0;
    return {
      compiled: { query: compiled, fieldVariables: fieldVariables(request.document, request.operation!) },
      bytes: INTERPRETED_OPERATION_BYTES + codeLength * HEAP_BYTES_PER_GENERATED_CHARACTER,
    };
  } catch {
    return INTERPRETED;
  }
}

/** The operation's variables without a default that are the value of an input object's field somewhere in the document. */
function fieldVariables(document: DocumentNode, operation: OperationDefinitionNode): string[] {
  const withoutDefault = new Set(
    (operation.variableDefinitions ?? []).filter((definition) => !definition.defaultValue).map((definition) => definition.variable.name.value),
  );
  const found = new Set<string>();
  visit(document, {
    ObjectField(field) {
      if (field.value.kind === Kind.VARIABLE && withoutDefault.has(field.value.name.value)) found.add(field.value.name.value);
    },
  });
  return [...found];
}

/**
 * graphql-jit's errors inherit from graphql-js's GraphQLError but lack what its constructor
 * sets (extensions is undefined, not {}), and Apollo's error handling relies on it: each becomes
 * the error graphql-js would have made (same message, path, locations and original error).
 */
function withGraphQLJsErrors(result: ExecutionResult): ExecutionResult {
  if (!result.errors) return result;
  return {
    ...result,
    errors: result.errors.map((error) => {
      const converted = new GraphQLError(error.message, { path: error.path, originalError: error.originalError, extensions: error.extensions });
      (converted as { locations: GraphQLError['locations'] }).locations = error.locations;
      return converted;
    }),
  };
}
