/** Calls of the auth service (/auth), as a client makes them. */

export interface AuthResponse<Body = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: Body;
}

/** Nhost's error body. */
export interface AuthErrorBody {
  status: number;
  message: string;
  error: string;
}

/** A JSON request to `<base>/auth<path>`; the answer's body parsed (every answer of the service is JSON). */
export async function authCall<Body = Record<string, unknown>>(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<AuthResponse<Body>> {
  const response = await fetch(`${base}/auth${path}`, {
    method,
    redirect: 'manual',
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : null) as Body };
}

export const authPost = <Body = Record<string, unknown>>(base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  authCall<Body>(base, 'POST', path, body, headers);

/** The claims of a JWT, unverified (the test reads what the server signed). */
export function jwtPayload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function jwtHeader(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** The link in a mail's text part that starts with `prefix`. */
export function linkIn(text: string | undefined, prefix: string): string {
  const escaped = prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`${escaped}[^\\s<>"\\]]+`).exec(text ?? '');
  if (!match) throw new Error(`no link starting with ${prefix} in the mail:\n${text}`);
  return match[0];
}

/** Settings that let one test file sign in many times from one address; the limits have tests of their own. */
export const GENEROUS_AUTH_LIMITS: Record<string, string> = {
  AUTH_RATE_LIMIT_GLOBAL_BURST: '100000',
  AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: '100000',
  AUTH_RATE_LIMIT_SIGNUPS_BURST: '100000',
  AUTH_RATE_LIMIT_EMAIL_BURST: '100000',
};
