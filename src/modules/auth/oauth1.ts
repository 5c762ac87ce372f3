import { createHmac, randomBytes } from 'node:crypto';

/** RFC 3986 percent-encoding, as OAuth 1.0a (RFC 5849 §3.6) requires. */
export function percentEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`);
}

export interface OAuth1Credentials {
  consumerKey: string;
  consumerSecret: string;
  token?: string;
  tokenSecret?: string;
}

/**
 * The `Authorization: OAuth ...` header of a request signed with HMAC-SHA1 (RFC 5849 §3.4):
 * the signature covers the method, the URL without its query, and every parameter (the query's,
 * the form body's and the protocol's), sorted.
 */
export function oauth1Header(
  method: string,
  url: string,
  credentials: OAuth1Credentials,
  extra: Record<string, string> = {},
  form: Record<string, string> = {},
): string {
  const protocol: Record<string, string> = {
    oauth_consumer_key: credentials.consumerKey,
    oauth_nonce: randomBytes(16).toString('hex'),
    oauth_signature_method: 'HMAC-SHA1',
    oauth_timestamp: String(Math.floor(Date.now() / 1000)),
    oauth_version: '1.0',
    ...(credentials.token ? { oauth_token: credentials.token } : {}),
    ...extra,
  };
  protocol.oauth_signature = oauth1Signature(method, url, { ...protocol, ...form }, credentials.consumerSecret, credentials.tokenSecret ?? '');
  return `OAuth ${Object.entries(protocol)
    .map(([name, value]) => `${percentEncode(name)}="${percentEncode(value)}"`)
    .join(', ')}`;
}

/** The HMAC-SHA1 signature of a request's parameters (the URL's query is read from `url`). */
export function oauth1Signature(method: string, url: string, parameters: Record<string, string>, consumerSecret: string, tokenSecret: string): string {
  const target = new URL(url);
  const pairs = [...target.searchParams.entries(), ...Object.entries(parameters).filter(([name]) => name !== 'oauth_signature')]
    .map(([name, value]) => [percentEncode(name), percentEncode(value)])
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1));
  const base = [
    method.toUpperCase(),
    percentEncode(`${target.origin}${target.pathname}`),
    percentEncode(pairs.map(([name, value]) => `${name}=${value}`).join('&')),
  ].join('&');
  return createHmac('sha1', `${percentEncode(consumerSecret)}&${percentEncode(tokenSecret)}`)
    .update(base)
    .digest('base64');
}
