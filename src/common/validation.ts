import { validate, type ValidationError, type ValidationOptions } from 'class-validator';
import type { FieldError } from './field-error.types';

export type FieldErrorCode = 'REQUIRED_FIELD' | 'INVALID_LENGTH' | 'INVALID_FORMAT' | 'ALREADY_EXISTS' | 'INTERNAL_ERROR';

/** Options for a class-validator decorator: the message and the field code it reports. */
export function rule(code: FieldErrorCode, message: string): ValidationOptions {
  return { message, context: { code } };
}

/**
 * Runs the class-validator rules of an input object and returns one FieldError per failing
 * field: the first of its failing rules as they are written, with the code the rule carries.
 */
export async function fieldErrors(input: object): Promise<FieldError[]> {
  const errors = await validate(input, {
    forbidUnknownValues: true,
    validationError: { target: false, value: false },
  });
  return errors.flatMap((error) => flatten(error, ''));
}

function flatten(error: ValidationError, prefix: string): FieldError[] {
  const field = prefix ? `${prefix}.${error.property}` : error.property;
  // Decorators apply bottom-up, so the failures arrive in reverse order of the source: the
  // last one is the top-most rule (required before format before length, as written).
  const own = Object.entries(error.constraints ?? {}).slice(-1).map(([constraint, message]) => ({
    field,
    message,
    code: (error.contexts?.[constraint]?.code as FieldErrorCode | undefined) ?? 'INVALID_FORMAT',
  }));
  return [...own, ...(error.children ?? []).flatMap((child) => flatten(child, field))];
}
