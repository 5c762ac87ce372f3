import { Kind, parse, print } from 'graphql';
import * as rawRootFields from '../../src/graphql/raw-root-fields';
import type { GraphQLResponse } from './graphql';

/*
 * The raw answer (an accepted query whose root fields are generated table fields, answered with
 * PostgreSQL's JSON text, src/graphql/raw-root-fields.ts) against the ordinary execution, over
 * every query of the test files that load their cases through compareRawAnswers (tables,
 * hasura-docs, role-differential, role-schemas): each POST of a query is sent first with `extensions: {}`,
 * which the accepted-query lane leaves to Apollo (parsing, validation, graphql-jit or graphql-js
 * completing the parsed rows), then as the test wrote it, which the lane now takes. The two
 * answers must have the same status and, parsed and written again, the same text (key order
 * included); the tests' own expectations then run on the second. The answers PostgreSQL writes
 * differ only in spacing and in how numbers are spelled (1.50, 1e-05), which parsing removes.
 */

const counts = { compared: 0, raw: 0, sameBytes: 0 };
/** The answers the lane wrote without execution: counted when rawAnswer gives a body. */
const rawAnswer = rawRootFields.rawAnswer;
jest.spyOn(rawRootFields, 'rawAnswer').mockImplementation((...args) => {
  const answer = rawAnswer(...args);
  return answer?.then((text) => {
    if (text !== undefined) counts.raw++;
    return text;
  });
});

/** A POST body of queries only (a mutation would run twice), which the lane may take. */
function comparable(body: unknown): body is { query: string; extensions?: undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const { query, extensions } = body as { query?: unknown; extensions?: unknown };
  if (typeof query !== 'string' || extensions !== undefined) return false;
  try {
    return parse(query).definitions.every((definition) => definition.kind !== Kind.OPERATION_DEFINITION || definition.operation === 'query');
  } catch {
    return false;
  }
}

async function post(url: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; response: Response; text: string }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: response.status, response, text: await response.text() };
}

async function postTwice<TData>(url: string, body: unknown, headers: Record<string, string> = {}): Promise<GraphQLResponse<TData>> {
  const actual = jest.requireActual<typeof import('./graphql')>('./graphql');
  if (!comparable(body)) return actual.postGraphQL<TData>(url, body, headers);
  const reference = await post(url, { ...body, extensions: {} }, headers);
  // A table dropped under its metadata: the first answer's error re-reads the metadata, and the
  // schema no longer has the field for the second. That answer is the test's to check.
  const answer = reference.text.includes('"INCONSISTENT_METADATA"') ? reference : await post(url, body, headers);
  expect({ query: body.query, status: answer.status, body: JSON.stringify(JSON.parse(answer.text)) }).toEqual({
    query: body.query,
    status: reference.status,
    body: JSON.stringify(JSON.parse(reference.text)),
  });
  expect(answer.response.headers.get('content-type')).toBe(reference.response.headers.get('content-type'));
  counts.compared++;
  if (answer.text === reference.text) counts.sameBytes++;
  return { status: answer.status, contentType: answer.response.headers.get('content-type'), headers: answer.response.headers, body: JSON.parse(answer.text) };
}

jest.mock('./graphql', () => ({
  ...jest.requireActual<typeof import('./graphql')>('./graphql'),
  postGraphQL: postTwice,
  graphql: (url: string, document: Parameters<typeof print>[0], variables?: unknown, headers?: Record<string, string>) =>
    postTwice(url, { query: print(document), variables }, headers),
}));

/**
 * Runs a file of test cases (required by `loadCases`, after the comparison is in place) with every
 * query it sends compared on both paths; the file must send some queries the lane answers raw.
 */
export function compareRawAnswers(label: string, loadCases: () => void): void {
  loadCases();
  afterAll(() => {
    console.log(`${label}: ${counts.compared} queries compared, ${counts.raw} answered raw, ${counts.sameBytes} byte for byte`);
    expect(counts.compared).toBeGreaterThan(0);
    expect(counts.raw).toBeGreaterThan(0);
  });
}
