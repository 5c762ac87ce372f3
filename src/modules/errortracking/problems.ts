import { Refusal } from '../../common/refusal';

/** Bad input in one field: VALIDATION_ERROR naming it. */
export const invalid = (field: string, message: string) => new Refusal('VALIDATION_ERROR', message, 400, { field });
export const notFound = (what: string) => new Refusal('NOT_FOUND', `${what} not found`, 404);

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
