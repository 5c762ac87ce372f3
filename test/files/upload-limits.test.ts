import 'reflect-metadata';
import fc from 'fast-check';
import { UploadAndProcessFileDocument, type FileUploadInput } from '../generated/graphql';
import { isStrictBase64 } from '../../src/modules/files/files.service';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/**
 * Uploads at the documented limits (FILES_MAX_BYTES 10 MiB, every other setting at its default):
 * upload.test.ts lowers the limits and never sees a file of several MiB.
 */
const MiB = 1024 * 1024;
const LIMIT = 10 * MiB;
const OWNER = bearer(signToken({ userId: '6f1d1c9e-4c41-4d55-9b7e-1a2b3c4d5e6f' }));

function fileInput(size: number): FileUploadInput {
  const content = Buffer.alloc(size, 'plinth ');
  return {
    file_name: `${size}.txt`,
    file_type: 'text/plain',
    file_size: size,
    file_data: content.toString('base64'),
    processing_options: { generate_thumbnail: false, parse_data: false },
  };
}

const accepted = expect.objectContaining({ success: true, errors: null, file_id: expect.any(String) });
const overLimit = expect.objectContaining({
  success: false,
  errors: [{ field: 'file_size', code: 'INVALID_LENGTH', message: `file_size must be at most ${LIMIT} bytes (FILES_MAX_BYTES)` }],
});

const SIZES: [string, number, unknown][] = [
  ['3.5 MiB', 3.5 * MiB, accepted],
  ['4 MiB', 4 * MiB, accepted],
  ['one byte under the limit', LIMIT - 1, accepted],
  ['exactly the limit', LIMIT, accepted],
  ['one byte over the limit', LIMIT + 1, overLimit],
];

describe.each([
  ['compiled execution', 'true'],
  ['graphql-js execution', 'false'],
])('uploadAndProcessFile at the default limits (%s)', (_name, compiled) => {
  let server: TestServer;
  const lines: string[] = [];
  beforeAll(async () => {
    // No worker: processing is not what is tested here.
    server = await startTestServer(
      { GQL_GRAPHQL_COMPILED_EXECUTION: compiled, PLINTH_PROCESS_ROLES: 'api', LOG_LEVEL: 'error' },
      { logTo: { write: (line: string) => void lines.push(line) } },
    );
  });
  afterAll(async () => {
    await server.close();
    expect(lines).toEqual([]);
  });

  it.each(SIZES)('%s: an answer per field over GraphQL, never an INTERNAL_SERVER_ERROR', async (_case, size, expected) => {
    const response = await graphql(server.graphqlUrl, UploadAndProcessFileDocument, { input: fileInput(size) }, OWNER);
    expect(response.status).toBe(200);
    expect(response.body.errors).toBeUndefined();
    expect(response.body.data!.uploadAndProcessFile).toEqual(expected);
  });
});

describe('the handler route /actions/upload-and-process-file at the default limits', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' });
  });
  afterAll(async () => {
    await server.close();
  });

  it.each(SIZES)('%s: the envelope of spec 1 §2.3, never a 500', async (_case, size, expected) => {
    const response = await fetch(`${server.url}/actions/upload-and-process-file`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-gql-admin-secret': ADMIN_SECRET,
        'x-gql-role': 'user',
        'x-gql-user-id': '6f1d1c9e-4c41-4d55-9b7e-1a2b3c4d5e6f',
      },
      body: JSON.stringify({ action: { name: 'uploadAndProcessFile' }, input: { input: fileInput(size) }, session_variables: {} }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toEqual(expected);
    if (size > LIMIT) expect(body.error_code).toBe('VALIDATION_ERROR');
  });
});

describe('the base64 check', () => {
  /** The rule the check replaces (a regular expression that overflows on long text), as the reference. */
  const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

  it('accepts and refuses exactly what the strict rule did: the alphabet, padding, line breaks, other alphabets', () => {
    const characters = fc.constantFrom(...'AZaz09+/=-_ \n\r.é'.split(''));
    fc.assert(
      fc.property(fc.string({ unit: characters, maxLength: 24 }), (text) => {
        expect(isStrictBase64(text)).toBe(STRICT_BASE64.test(text));
      }),
      { numRuns: 5_000 },
    );
    for (const text of ['', 'QQ==', 'QUI=', 'QUJD', 'QQ=', 'Q===', '=QUJ', 'QU=D', 'QUJD\n', 'QUJD====', 'QUJ-', 'QUJ_']) {
      expect([text, isStrictBase64(text)]).toEqual([text, STRICT_BASE64.test(text)]);
    }
  });

  it('takes base64 of any length without overflowing, and refuses a bad character at its very end', () => {
    const long = Buffer.alloc(LIMIT, 7).toString('base64');
    expect(isStrictBase64(long)).toBe(true);
    expect(isStrictBase64(`${long.slice(0, -4)}QU\nD`)).toBe(false);
    expect(isStrictBase64(`${long.slice(0, -4)}Q===`)).toBe(false);
  });
});
