import Negotiator from 'negotiator';

export const GRAPHQL_RESPONSE_JSON = 'application/graphql-response+json; charset=utf-8';
export const APPLICATION_JSON = 'application/json; charset=utf-8';

/**
 * The media type of a GraphQL response, negotiated from Accept as Apollo Server does it
 * (application/json when there is no Accept header or on a tie); null when the client
 * accepts neither (406).
 */
export function chooseGraphQLMediaType(accept: string | undefined): string | null {
  if (!accept) return APPLICATION_JSON;
  return new Negotiator({ headers: { accept } }).mediaType([APPLICATION_JSON, GRAPHQL_RESPONSE_JSON]) ?? null;
}
