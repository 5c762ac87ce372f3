/**
 * A refusal the caller can act on: bad input, an unknown id, a move an incident cannot make.
 * Routes answer it with `status` and `code`; resolvers with a GraphQL error of that code.
 */
export class ErrorTrackingProblem extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 429 = 400,
    /** The input field at fault, when one is. */
    readonly field?: string,
  ) {
    super(message);
    this.name = 'ErrorTrackingProblem';
  }
}

export const invalid = (field: string, message: string) => new ErrorTrackingProblem('VALIDATION_ERROR', message, 400, field);
export const notFound = (what: string) => new ErrorTrackingProblem('NOT_FOUND', `${what} not found`, 404);

/** Trimmed text of 1..max characters, or a VALIDATION_ERROR naming the field. */
export function requiredText(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.trim() === '') throw invalid(field, `${field} is required`);
  const text = value.trim();
  if (text.length > max) throw invalid(field, `${field} must be at most ${max} characters`);
  return text;
}

export function optionalText(value: unknown, field: string, max: number): string | null {
  if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) return null;
  return requiredText(value, field, max);
}

/** Service names: what SLOs, incidents and status page components are keyed by. */
const SERVICE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export function serviceName(value: unknown, field = 'service'): string {
  const text = requiredText(value, field, 100);
  if (!SERVICE_NAME.test(text)) throw invalid(field, `${field} must be letters, digits, '.', '_' or '-' (at most 100), starting with a letter or digit`);
  return text;
}
