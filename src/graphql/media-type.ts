import Negotiator from 'negotiator';

export const GRAPHQL_RESPONSE_JSON = 'application/graphql-response+json; charset=utf-8';
export const APPLICATION_JSON = 'application/json; charset=utf-8';
/** Answers depend on the caller's credentials: no shared cache may keep them. */
export const GRAPHQL_CACHE_CONTROL = 'no-store';

const chosenByAccept = new Map<string, string | null>();
/** Accept values kept in the memo, and the longest kept: together at most 64 KiB of the clients' text. */
const ACCEPT_MEMO_ENTRIES = 256;
const ACCEPT_MEMO_MAX_LENGTH = 256;

/**
 * The media type of a GraphQL response, negotiated from Accept as Apollo Server does it
 * (application/json when there is no Accept header or on a tie); null when the client
 * accepts neither (406).
 */
export function chooseGraphQLMediaType(accept: string | undefined): string | null {
  if (!accept) return APPLICATION_JSON;
  let chosen = chosenByAccept.get(accept);
  if (chosen === undefined) {
    chosen = new Negotiator({ headers: { accept } }).mediaType([APPLICATION_JSON, GRAPHQL_RESPONSE_JSON]) ?? null;
    if (accept.length > ACCEPT_MEMO_MAX_LENGTH) return chosen;
    // Clients send a handful of distinct Accept values; a flood of odd ones only resets the memo.
    if (chosenByAccept.size >= ACCEPT_MEMO_ENTRIES) chosenByAccept.clear();
    chosenByAccept.set(accept, chosen);
  }
  return chosen;
}

/**
 * Whether the GraphQL routes read a POST body of this Content-Type: application/json in UTF-8 (no
 * charset, or charset=utf-8), the one media type the GraphQL-over-HTTP specification requires.
 * Anything else is refused with 415 before the body is read; Fastify's own parsers would read
 * text/plain, and Apollo then answer 400 as if the body were missing. No header at all is left to
 * Fastify (415 for a body) and Apollo (400 for none).
 */
export function isGraphQLRequestMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType === 'application/json') return true;
  const [type, ...parameters] = contentType.split(';');
  if (type.trim().toLowerCase() !== 'application/json') return false;
  return parameters.every((parameter) => {
    const [name, value = ''] = parameter.split('=');
    return name.trim().toLowerCase() !== 'charset' || /^"?utf-?8"?$/i.test(value.trim());
  });
}

/** The message of the 415 for a body the GraphQL routes do not read. */
export function unsupportedGraphQLMediaTypeMessage(contentType: string): string {
  return `GraphQL requests are read as application/json in UTF-8, not as ${contentType.slice(0, 100)}`;
}

/**
 * Whether a request comes from a browser opening the URL: its Accept ranks text/html above both
 * JSON types (API clients that accept anything get JSON).
 */
export function prefersHtml(accept: string | undefined): boolean {
  return (
    accept !== undefined &&
    accept.includes('text/html') &&
    new Negotiator({ headers: { accept } }).mediaType([APPLICATION_JSON, GRAPHQL_RESPONSE_JSON, 'text/html']) === 'text/html'
  );
}
