import { validate, type ValidationError, type ValidationOptions } from 'class-validator';
import type { FieldError } from './field-error.types';
import { isUnstorableText, UNSTORABLE_TEXT_MESSAGE } from './text';

export type FieldErrorCode = 'REQUIRED_FIELD' | 'INVALID_LENGTH' | 'INVALID_FORMAT' | 'ALREADY_EXISTS' | 'INTERNAL_ERROR';

/** Options for a class-validator decorator: the message and the field code it reports. */
export function rule(code: FieldErrorCode, message: string): ValidationOptions {
  return { message, context: { code } };
}

/**
 * One decorator made of several rules, so inputs sharing a field share its rules; they read and
 * report in the order given, as if written one above the other.
 */
export function rules(...decorators: PropertyDecorator[]): PropertyDecorator {
  // Decorators written above one another apply bottom-up: apply these the same way.
  return (target, property) => [...decorators].reverse().forEach((decorate) => decorate(target, property));
}

/**
 * Runs the class-validator rules of an input object and returns one FieldError per failing
 * field: the first of its failing rules as they are written, with the code the rule carries.
 * Text that cannot be stored is an INVALID_FORMAT error on its field, decided first: the rules
 * never see it (validator's isEmail, for one, throws on a lone surrogate).
 */
export async function fieldErrors(input: object): Promise<FieldError[]> {
  const unstorable: FieldError[] = [];
  const checkable = withoutUnstorableText(input, '', unstorable);
  const errors = await validate(checkable, {
    forbidUnknownValues: true,
    validationError: { target: false, value: false },
  });
  const reported = new Set(unstorable.map((error) => error.field));
  return [...unstorable, ...errors.flatMap((error) => flatten(error, '')).filter((error) => !reported.has(error.field))];
}

/** A copy (same prototypes) in which unstorable strings are unset and reported. */
function withoutUnstorableText<T>(value: T, path: string, found: FieldError[]): T {
  if (typeof value === 'string' && isUnstorableText(value)) {
    found.push({ field: path, message: `${path} ${UNSTORABLE_TEXT_MESSAGE}`, code: 'INVALID_FORMAT' });
    return undefined as T;
  }
  if (Array.isArray(value)) return value.map((item, index) => withoutUnstorableText(item, `${path}.${index}`, found)) as T;
  if (value === null || typeof value !== 'object') return value;
  const copy = Object.create(Object.getPrototypeOf(value)) as Record<string, unknown>;
  for (const [key, item] of Object.entries(value)) copy[key] = withoutUnstorableText(item, path ? `${path}.${key}` : key, found);
  return copy as T;
}

function flatten(error: ValidationError, prefix: string): FieldError[] {
  const field = prefix ? `${prefix}.${error.property}` : error.property;
  // Decorators apply bottom-up, so the failures arrive in reverse order of the source: the
  // last one is the top-most rule (required before format before length, as written).
  const own = Object.entries(error.constraints ?? {})
    .slice(-1)
    .map(([constraint, message]) => ({
      field,
      message,
      code: (error.contexts?.[constraint]?.code as FieldErrorCode | undefined) ?? 'INVALID_FORMAT',
    }));
  return [...own, ...(error.children ?? []).flatMap((child) => flatten(child, field))];
}
