/** What a refusal may carry besides its code, message and status. */
export interface RefusalDetails {
  /** The input field at fault, when one is. */
  field?: string;
  /** When the caller may try again: `Retry-After` on REST, `retryAfter` on GraphQL. */
  retryAfterSeconds?: number;
  /** More headers of the REST answer. */
  headers?: Record<string, string>;
}

/**
 * A request refused for a reason the caller can act on: bad input, not allowed, not found, a
 * conflict, too many. Services throw it and every transport answers it the same way: REST with
 * `status`, `code` and `message` in the route's error format (http/errors.ts; the auth routes in
 * Nhost's shape), GraphQL by failing the field with `extensions`, which graphql-js and
 * graphql-jit copy from the error a resolver throws. Anything else thrown is unexpected: logged,
 * and masked for the caller.
 */
export class Refusal extends Error {
  override readonly name = 'Refusal';
  readonly field: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  /** The headers of the REST answer. */
  readonly headers: Readonly<Record<string, string>>;
  /** The GraphQL error's extensions: the code, the field and retryAfter when there are. */
  readonly extensions: Readonly<Record<string, unknown>>;

  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    { field, retryAfterSeconds, headers = {} }: RefusalDetails = {},
  ) {
    super(message);
    this.field = field;
    this.retryAfterSeconds = retryAfterSeconds;
    this.headers = retryAfterSeconds === undefined ? headers : { 'retry-after': String(retryAfterSeconds), ...headers };
    this.extensions = {
      code,
      ...(field === undefined ? {} : { field }),
      ...(retryAfterSeconds === undefined ? {} : { retryAfter: retryAfterSeconds }),
    };
  }
}

export const RATE_LIMITED = 'RATE_LIMITED';

/** Too many requests: 429 with Retry-After on REST, RATE_LIMITED with retryAfter (seconds) on GraphQL. */
export function tooManyRequests(
  retryAfterSeconds: number,
  message = `Too many requests; try again in ${retryAfterSeconds} s`,
  headers?: Record<string, string>,
): Refusal {
  return new Refusal(RATE_LIMITED, message, 429, { retryAfterSeconds, headers });
}

/** A limit's refusal (tooManyRequests), whose retryAfterSeconds is always set. */
export function isTooManyRequests(error: unknown): error is Refusal & { retryAfterSeconds: number } {
  return error instanceof Refusal && error.code === RATE_LIMITED && error.retryAfterSeconds !== undefined;
}
