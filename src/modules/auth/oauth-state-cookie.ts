import { timingSafeEqual } from 'node:crypto';

/**
 * The cookie that binds a provider sign-in to the browser that started it: it holds the `state`,
 * and the callback goes on only when the browser brings it back with the same state. Without it
 * anyone could hand a victim the callback URL of a sign-in they started themselves (login CSRF).
 */
export const OAUTH_STATE_COOKIE = 'plinth_oauth_state';

/** Where and how the browser keeps the cookie of one provider's sign-in. */
export interface StateCookieScope {
  /** The provider's callback path under AUTH_SERVER_URL: the only requests that carry the cookie. */
  path: string;
  /** AUTH_SERVER_URL is https: the cookie never travels in clear. */
  secure: boolean;
  /**
   * The provider returns by a cross-site form POST: SameSite=None (which browsers accept only with
   * Secure), since a SameSite=Lax cookie is not sent with such a POST.
   */
  formPost: boolean;
}

function attributes(scope: StateCookieScope, maxAgeSeconds: number): string {
  const sameSite = scope.formPost ? 'None' : 'Lax';
  const secure = scope.secure || scope.formPost ? '; Secure' : '';
  return `Path=${scope.path}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=${sameSite}${secure}`;
}

/** The Set-Cookie value that keeps `state` for `maxAgeSeconds` (the state's own lifetime). */
export function stateCookie(state: string, scope: StateCookieScope, maxAgeSeconds: number): string {
  return `${OAUTH_STATE_COOKIE}=${state}; ${attributes(scope, maxAgeSeconds)}`;
}

/** The Set-Cookie value that removes the cookie. */
export function clearedStateCookie(scope: StateCookieScope): string {
  return `${OAUTH_STATE_COOKIE}=; ${attributes(scope, 0)}`;
}

/** Whether a Cookie header carries the state cookie with exactly `state` (compared in constant time). */
export function cookieHoldsState(cookieHeader: string | undefined, state: string): boolean {
  const expected = Buffer.from(state);
  let found = false;
  for (const pair of (cookieHeader ?? '').split(';')) {
    const separator = pair.indexOf('=');
    if (separator < 0 || pair.slice(0, separator).trim() !== OAUTH_STATE_COOKIE) continue;
    const given = Buffer.from(pair.slice(separator + 1).trim());
    if (given.length === expected.length && timingSafeEqual(given, expected)) found = true;
  }
  return found;
}
