import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';

export interface GraphQLErrorBody {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; [key: string]: unknown };
}

export interface GraphQLResponse<TData> {
  status: number;
  contentType: string | null;
  headers: Headers;
  body: { data?: TData | null; errors?: GraphQLErrorBody[] };
}

/** Sends a typed operation over HTTP POST, as a GraphQL client does. */
export async function graphql<TData, TVariables>(
  url: string,
  document: TypedDocumentNode<TData, TVariables>,
  variables?: TVariables,
  headers: Record<string, string> = {},
): Promise<GraphQLResponse<TData>> {
  return postGraphQL<TData>(url, { query: print(document), variables }, headers);
}

/** Posts any JSON body to the GraphQL endpoint (for requests no typed client would send). */
export async function postGraphQL<TData = unknown>(url: string, body: unknown, headers: Record<string, string> = {}): Promise<GraphQLResponse<TData>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get('content-type'), headers: response.headers, body: JSON.parse(text) };
}
