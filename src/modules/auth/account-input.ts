import { MAIL_ADDRESS } from '../../common/mail-address';
import { invalidRequest } from './auth-errors';

/** The sign-up options of Nhost's bodies (sign-up, passwordless sign-in, deanonymize). */
export interface SignUpOptions {
  displayName?: string;
  locale?: string;
  defaultRole?: string;
  allowedRoles?: string[];
  metadata?: Record<string, unknown>;
  redirectTo?: string;
}

export interface SignUpInput {
  email: string;
  password: string;
  options?: SignUpOptions;
}

export interface DeanonymizeInput {
  signInMethod: 'email-password' | 'passwordless';
  email: string;
  password?: string;
  options?: SignUpOptions;
}

const MAX_EMAIL_LENGTH = 254;
export const MAX_DISPLAY_NAME_LENGTH = 255;
const LOCALE = /^[a-z]{2,3}$/;

/** The address typed in `field`, trimmed and in lower case; 400 invalid-request when it is not one. */
export function emailAddress(value: string, field: string): string {
  const email = value.trim().toLowerCase();
  if (email.length > MAX_EMAIL_LENGTH || !MAIL_ADDRESS.test(email) || !/@[^.]+(\.[^.]+)*$/.test(email)) {
    throw invalidRequest(`${field} must be a valid e-mail address`);
  }
  return email;
}

/** `options.displayName` trimmed, undefined when empty; 400 invalid-request when too long. */
export function displayName(value: string | undefined): string | undefined {
  const name = value?.trim();
  if (name && [...name].length > MAX_DISPLAY_NAME_LENGTH) {
    throw invalidRequest(`options.displayName must be at most ${MAX_DISPLAY_NAME_LENGTH} characters`);
  }
  return name || undefined;
}

/** A language code, `en` when none is given; 400 invalid-request otherwise. */
export function locale(value: string | undefined): string {
  if (value !== undefined && !LOCALE.test(value)) throw invalidRequest('locale must be a language code of two or three letters, such as en');
  return value ?? 'en';
}
