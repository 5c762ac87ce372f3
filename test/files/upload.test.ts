import { createHash, createHmac, randomUUID } from 'node:crypto';
import http from 'node:http';
import sharp from 'sharp';
import { FileDocument, FileProcessingUpdatedDocument, UploadAndProcessFileDocument, type FileFieldsFragment, type FileUploadInput } from '../generated/graphql';
import { loadConfig } from '../../src/config';
import { UrlSigner } from '../../src/platform/signed-urls';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql, postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, PRODUCTION, startTestServer, STORAGE_URL_SIGNING_SECRET, testEnvironment, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { subscribe, subscriptionClient } from '../support/ws';

const MAX_BYTES = 64 * 1024;
const BODY_LIMIT = 16 * 1024;
const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };
const OWNER_ID = randomUUID();
const OWNER = bearer(signToken({ userId: OWNER_ID }));
const STRANGER = bearer(signToken({ userId: randomUUID() }));
const SETTINGS = {
  FILES_MAX_BYTES: String(MAX_BYTES),
  GQL_GRAPHQL_BODY_LIMIT: String(BODY_LIMIT),
  JOBS_POLL_INTERVAL_SECONDS: '1',
};

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer(SETTINGS);
});
afterAll(async () => {
  await server.close();
});

const upload = (input: FileUploadInput, headers: Record<string, string> = OWNER) =>
  graphql(server.graphqlUrl, UploadAndProcessFileDocument, { input }, headers);

function fileInput(content: Buffer, fileType: string, fileName = 'data.bin'): FileUploadInput {
  return { file_name: fileName, file_type: fileType, file_size: content.length, file_data: content.toString('base64') };
}

async function fileAs(id: string, headers: Record<string, string>): Promise<FileFieldsFragment | null | undefined> {
  return (await graphql(server.graphqlUrl, FileDocument, { id }, headers)).body.data?.file;
}

/** The file once its processing finished (COMPLETED or FAILED). */
async function processed(id: string): Promise<FileFieldsFragment> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const file = await fileAs(id, ADMIN);
    if (file && (file.status === 'COMPLETED' || file.status === 'FAILED')) return file;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`file ${id} was not processed in time`);
}

async function storedCounts(): Promise<{ files: number; objects: number; jobs: number }> {
  const [row] = await server.database.query<{ files: string; objects: string; jobs: string }>(
    `SELECT (SELECT count(*) FROM files) AS files, (SELECT count(*) FROM storage_objects) AS objects,
            (SELECT count(*) FROM pgboss.job WHERE name = 'file-processing') AS jobs`,
  );
  return { files: Number(row.files), objects: Number(row.objects), jobs: Number(row.jobs) };
}

/** A link Plinth made (under PLINTH_PUBLIC_URL, localhost:8080 in tests) pointed at the test server. */
function local(link: string): string {
  return link.replace(/^http:\/\/localhost:\d+/, server.url);
}

async function pngOf(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 30, b: 90 } } })
    .png()
    .toBuffer();
}

describe('uploadAndProcessFile: images', () => {
  it('stores a PNG and processing finds its dimensions, makes a thumbnail and the checksum', async () => {
    const png = await pngOf(640, 480);
    const response = await upload({ ...fileInput(png, 'image/png', 'photo.png'), processing_options: { thumbnail_size: 64 } });
    const output = response.body.data!.uploadAndProcessFile;
    expect(output).toMatchObject({ success: true, errors: null, file_id: expect.any(String), processing_job_id: expect.any(String) });
    expect(output.file_url).toMatch(new RegExp(`/files/${output.file_id}/content\\?expires=\\d+&signature=`));

    const file = await processed(output.file_id!);
    expect(file).toMatchObject({
      status: 'COMPLETED',
      file_name: 'photo.png',
      file_type: 'image/png',
      file_size: png.length,
      owner_id: OWNER_ID,
      processing_job_id: output.processing_job_id,
      checksum_sha256: createHash('sha256').update(png).digest('hex'),
      image: { width: 640, height: 480, format: 'png', thumbnail_width: 64, thumbnail_height: 48 },
      data: null,
      error: null,
    });

    const content = await fetch(local(output.file_url!));
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('image/png');
    expect(content.headers.get('x-content-type-options')).toBe('nosniff');
    expect(content.headers.get('content-disposition')).toBe(`inline; filename="photo.png"; filename*=UTF-8''photo.png`);
    expect(Buffer.from(await content.arrayBuffer()).equals(png)).toBe(true);

    const thumbnail = await fetch(local(file.image!.thumbnail_url!));
    expect(thumbnail.headers.get('content-type')).toBe('image/png');
    const metadata = await sharp(Buffer.from(await thumbnail.arrayBuffer())).metadata();
    expect([metadata.width, metadata.height, metadata.format]).toEqual([64, 48, 'png']);
  });

  it('fails the processing, not the upload, of an image that is not what its type says', async () => {
    const output = (await upload(fileInput(Buffer.from('plain text, not a picture'), 'image/png', 'fake.png'))).body.data!.uploadAndProcessFile;
    expect(output.success).toBe(true);
    const file = await processed(output.file_id!);
    expect(file).toMatchObject({ status: 'FAILED', image: null, checksum_sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(file.error).toMatch(/PNG/);
  });
});

describe('uploadAndProcessFile: data files', () => {
  it('parses a CSV, counting rows and columns and reporting the bad row by its line', async () => {
    const csv = Buffer.from('id,name,email\n1,Ada,ada@example.com\n2,Grace\n3,"Linus, T",linus@example.com\n');
    const output = (await upload(fileInput(csv, 'text/csv', 'people.csv'))).body.data!.uploadAndProcessFile;
    const file = await processed(output.file_id!);
    expect(file.status).toBe('COMPLETED');
    expect(file.data).toEqual({
      format: 'csv',
      row_count: 3,
      columns: ['id', 'name', 'email'],
      error_count: 1,
      errors: [{ line: 3, message: 'expected 3 fields, found 2' }],
    });

    const download = await fetch(local(output.file_url!));
    expect(download.headers.get('content-type')).toBe('text/csv');
    expect(download.headers.get('content-disposition')).toMatch(/^attachment; filename="people.csv"/);
  });

  it('reports an unclosed quote as the error of its line', async () => {
    const csv = Buffer.from('a;b\n1;2\n3;"open\n');
    const input = { ...fileInput(csv, 'text/csv'), processing_options: { csv_delimiter: ';', max_errors: 5 } };
    const file = await processed((await upload(input)).body.data!.uploadAndProcessFile.file_id!);
    expect(file.data).toMatchObject({ row_count: 1, columns: ['a', 'b'], error_count: 1 });
    expect(file.data!.errors[0].message).toMatch(/quote/i);
  });

  it('parses JSON: array items are rows, object keys are columns; a syntax error names its line', async () => {
    const json = Buffer.from(
      JSON.stringify([
        { id: 1, name: 'a' },
        { id: 2, tags: [] },
      ]),
    );
    const good = await processed((await upload(fileInput(json, 'application/json'))).body.data!.uploadAndProcessFile.file_id!);
    expect(good.data).toEqual({ format: 'json', row_count: 2, columns: ['id', 'name', 'tags'], error_count: 0, errors: [] });

    const broken = Buffer.from('[\n  {"id": 1},\n  {"id": 2,}\n]');
    const bad = await processed((await upload(fileInput(broken, 'application/json'))).body.data!.uploadAndProcessFile.file_id!);
    expect(bad.data).toMatchObject({ format: 'json', row_count: 0, error_count: 1, errors: [{ line: 3 }] });
  });
});

describe('uploadAndProcessFile: refusals store nothing', () => {
  const text = Buffer.from('hello');
  it.each<[string, Partial<FileUploadInput>, { field: string; code: string }]>([
    ['invalid base64', { file_data: 'not base64!' }, { field: 'file_data', code: 'INVALID_FORMAT' }],
    ['unpadded base64', { file_data: 'aGVsbG8' }, { field: 'file_data', code: 'INVALID_FORMAT' }],
    ['a size that is not the decoded size', { file_size: 6 }, { field: 'file_size', code: 'INVALID_FORMAT' }],
    ['a declared size over FILES_MAX_BYTES', { file_size: MAX_BYTES + 1 }, { field: 'file_size', code: 'INVALID_LENGTH' }],
    ['a type outside FILES_ALLOWED_TYPES', { file_type: 'text/html' }, { field: 'file_type', code: 'INVALID_FORMAT' }],
    ['a name with a path', { file_name: '../etc/passwd' }, { field: 'file_name', code: 'INVALID_FORMAT' }],
    ['an empty name', { file_name: '  ' }, { field: 'file_name', code: 'REQUIRED_FIELD' }],
    ['a name with NUL', { file_name: 'a\u0000b' }, { field: 'file_name', code: 'INVALID_FORMAT' }],
    ['a thumbnail size out of range', { processing_options: { thumbnail_size: 5000 } }, { field: 'processing_options.thumbnail_size', code: 'INVALID_FORMAT' }],
    ['a delimiter of two characters', { processing_options: { csv_delimiter: ';;' } }, { field: 'processing_options.csv_delimiter', code: 'INVALID_FORMAT' }],
  ])('%s', async (_case, change, error) => {
    const before = await storedCounts();
    const output = (await upload({ ...fileInput(text, 'text/plain', 'hello.txt'), ...change })).body.data!.uploadAndProcessFile;
    expect(output).toMatchObject({ success: false, file_id: null, file_url: null, processing_job_id: null, message: 'Validation failed' });
    expect(output.errors).toEqual([expect.objectContaining(error)]);
    expect(await storedCounts()).toEqual(before);
  });

  it('reports every failing field at once', async () => {
    const output = (await upload({ file_name: '', file_type: 'application/x-msdownload', file_size: 0, file_data: '%%%' })).body.data!.uploadAndProcessFile;
    expect(output.errors!.map((error) => error.field)).toEqual(['file_name', 'file_type', 'file_size', 'file_data']);
  });

  it('refuses a file over FILES_MAX_BYTES whose size is declared honestly', async () => {
    const before = await storedCounts();
    const big = Buffer.alloc(MAX_BYTES + 3, 7);
    const response = await upload(fileInput(big, 'text/plain'));
    // The body fits the upload limit only just: base64 of the limit plus the envelope's room.
    const output = response.body.data!.uploadAndProcessFile;
    expect(output.success).toBe(false);
    expect(output.errors!.map((error) => [error.field, error.code])).toEqual([
      ['file_size', 'INVALID_LENGTH'],
      ['file_data', 'INVALID_LENGTH'],
    ]);
    expect(await storedCounts()).toEqual(before);
  });

  it('is FORBIDDEN to an anonymous caller', async () => {
    const response = await upload(fileInput(text, 'text/plain'), {});
    expect(response.body.errors![0].extensions!.code).toBe('FORBIDDEN');
  });
});

describe('who sees a file', () => {
  let fileId: string;
  let fileUrl: string;
  beforeAll(async () => {
    const output = (await upload(fileInput(Buffer.from('secret notes'), 'text/plain', 'notes.txt'))).body.data!.uploadAndProcessFile;
    fileId = output.file_id!;
    fileUrl = local(output.file_url!);
    await processed(fileId);
  });

  it('shows the file to its owner and admins, and to nobody else', async () => {
    expect((await fileAs(fileId, OWNER))?.id).toBe(fileId);
    expect((await fileAs(fileId, ADMIN))?.id).toBe(fileId);
    expect(await fileAs(fileId, STRANGER)).toBeNull();
    expect(await fileAs(randomUUID(), OWNER)).toBeNull();
  });

  it('serves the content with the session of the owner or an admin, not of another user', async () => {
    const path = `${server.url}/files/${fileId}/content`;
    const byOwner = await fetch(path, { headers: OWNER });
    expect(byOwner.status).toBe(200);
    expect(await byOwner.text()).toBe('secret notes');
    expect(byOwner.headers.get('content-disposition')).toMatch(/^attachment; filename="notes.txt"/);
    expect((await fetch(path, { headers: { ...ADMIN, 'x-gql-role': 'admin' } })).status).toBe(200);
    const byStranger = await fetch(path, { headers: STRANGER });
    expect([byStranger.status, ((await byStranger.json()) as { error_code: string }).error_code]).toEqual([404, 'NOT_FOUND']);
    const anonymous = await fetch(path);
    expect([anonymous.status, ((await anonymous.json()) as { error_code: string }).error_code]).toEqual([401, 'UNAUTHENTICATED']);
    const badToken = await fetch(path, { headers: { authorization: 'Bearer nonsense' } });
    expect(badToken.status).toBe(401);
  });

  it('refuses a tampered link and an expired one, even with a session', async () => {
    const tampered = new URL(fileUrl);
    tampered.searchParams.set('expires', String(Number(tampered.searchParams.get('expires')) + 1000));
    const refused = await fetch(tampered, { headers: OWNER });
    expect([refused.status, ((await refused.json()) as { error_code: string }).error_code]).toEqual([403, 'INVALID_SIGNATURE']);

    const otherFile = fileUrl.replace(fileId, randomUUID());
    expect((await fetch(otherFile)).status).toBe(403);
    const thumbnailWithContentSignature = fileUrl.replace('/content?', '/thumbnail?');
    expect((await fetch(thumbnailWithContentSignature)).status).toBe(403);

    const signer = new UrlSigner(loadConfig(testEnvironment(server.database.url)));
    const expired = local(signer.sign(`/files/${fileId}/content`, 60, Date.now() - 120_000).url);
    const late = await fetch(expired);
    expect([late.status, ((await late.json()) as { error_code: string }).error_code]).toEqual([403, 'LINK_EXPIRED']);
    const fresh = local(signer.sign(`/files/${fileId}/content`, 60).url);
    expect((await fetch(fresh)).status).toBe(200);
  });

  it('answers 404 for a signed link to a file with no thumbnail', async () => {
    const signer = new UrlSigner(loadConfig(testEnvironment(server.database.url)));
    const url = local(signer.sign(`/files/${fileId}/thumbnail`, 60).url);
    expect((await fetch(url)).status).toBe(404);
  });
});

describe('body limits', () => {
  it('accepts an upload far above GQL_GRAPHQL_BODY_LIMIT', async () => {
    const content = Buffer.alloc(MAX_BYTES, 1);
    const output = (await upload(fileInput(content, 'text/plain'))).body.data!.uploadAndProcessFile;
    expect(output.success).toBe(true);
  });

  it('keeps GQL_GRAPHQL_BODY_LIMIT for every other request', async () => {
    const response = await postGraphQL(
      server.graphqlUrl,
      { query: 'query Padded($pad: String) { __typename }', variables: { pad: 'x'.repeat(BODY_LIMIT) } },
      OWNER,
    );
    expect(response.status).toBe(413);
    expect(response.body.errors![0].extensions!.code).toBe('PAYLOAD_TOO_LARGE');
    expect(response.body.errors![0].message).toMatch(/GQL_GRAPHQL_BODY_LIMIT/);
  });

  it('counts the bytes of a chunked body, which has no Content-Length', async () => {
    const body = JSON.stringify({ query: 'query Padded($pad: String) { __typename }', variables: { pad: 'x'.repeat(BODY_LIMIT) } });
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(body));
        controller.close();
      },
    });
    const response = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...OWNER },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(413);
  });

  it('refuses a large upload from an anonymous caller before reading it', async () => {
    const response = await upload(fileInput(Buffer.alloc(BODY_LIMIT, 1), 'text/plain'), {});
    expect(response.status).toBe(413);
    expect(response.body.errors![0].extensions!.code).toBe('PAYLOAD_TOO_LARGE');
  });

  /** Sends the head of a POST declaring `declaredBytes` and only the first bytes of its body, and waits for the answer. */
  const answerToPartialBody = (declaredBytes: number, headers: Record<string, string>) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(server.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': String(declaredBytes), ...headers },
      });
      request.on('response', (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => {
          request.destroy();
          resolve({ status: response.statusCode ?? 0, body });
        });
      });
      request.on('error', reject);
      // The rest of the body never comes: only a refusal made before reading it can answer.
      request.write('{"query":"mutation U($input: FileUploadInput!) { uploadAndProcessFile(input: $input) { success } }","variables":{"input":{"content":"');
    });

  it('refuses a large body declared by an anonymous caller before any more of it arrives', async () => {
    const answer = await answerToPartialBody(BODY_LIMIT * 2, {});
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body).errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('refuses a body declared over the upload limit before any more of it arrives, signed in or not', async () => {
    const answer = await answerToPartialBody(MAX_BYTES * 4, OWNER);
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body).errors[0].message).toMatch(/FILES_MAX_BYTES/);
  });

  it('answers a body over the upload limit with a clear 413, not a 500', async () => {
    const response = await postGraphQL(
      server.graphqlUrl,
      {
        query: 'mutation U($input: FileUploadInput!) { uploadAndProcessFile(input: $input) { success } }',
        variables: { input: fileInput(Buffer.alloc(MAX_BYTES * 2), 'text/plain') },
      },
      OWNER,
    );
    expect(response.status).toBe(413);
    expect(response.body.errors![0].message).toMatch(/FILES_MAX_BYTES/);
  });

  it('does not let another mutation ride along in a large upload request', async () => {
    const response = await postGraphQL(
      server.graphqlUrl,
      {
        query:
          'mutation U($input: FileUploadInput!) { uploadAndProcessFile(input: $input) { success } registerUser(input: {email: "x@example.com", password: "password1", name: "X"}) { success } }',
        variables: { input: fileInput(Buffer.alloc(BODY_LIMIT, 1), 'text/plain') },
      },
      OWNER,
    );
    expect(response.status).toBe(413);
  });
});

describe('the handler route /actions/upload-and-process-file', () => {
  const route = () => `${server.url}/actions/upload-and-process-file`;
  const call = (input: unknown, headers: Record<string, string>) =>
    fetch(route(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ action: { name: 'uploadAndProcessFile' }, input: { input }, session_variables: {} }),
    });
  const engine = (role: string, userId?: string) => ({ ...ADMIN, 'x-gql-role': role, ...(userId ? { 'x-gql-user-id': userId } : {}) });

  it('stores a file for the session user, with a body above GQL_GRAPHQL_BODY_LIMIT', async () => {
    const response = await call(fileInput(Buffer.alloc(BODY_LIMIT * 2, 2), 'text/plain'), engine('user', OWNER_ID));
    expect(response.status).toBe(200);
    const body = (await response.json()) as { file_id: string };
    expect(body).toMatchObject({ success: true, file_id: expect.any(String), file_url: expect.any(String) });
    expect((await fileAs(body.file_id, OWNER))?.owner_id).toBe(OWNER_ID);
  });

  it('answers invalid input with the envelope: success=false, errors and VALIDATION_ERROR', async () => {
    const response = await call({ ...fileInput(Buffer.from('x'), 'text/plain'), file_data: '!' }, engine('user', OWNER_ID));
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      success: false,
      error_code: 'VALIDATION_ERROR',
      errors: [{ field: 'file_data', code: 'INVALID_FORMAT', message: expect.any(String) }],
    });
  });

  it('refuses the unauthorised role (403) and a missing admin secret (401)', async () => {
    expect((await call(fileInput(Buffer.from('x'), 'text/plain'), engine('anonymous'))).status).toBe(403);
    expect((await call(fileInput(Buffer.from('x'), 'text/plain'), {})).status).toBe(401);
  });
});

describe('fileProcessingUpdated', () => {
  let database: TestDatabase;
  let api: TestServer;
  let worker: TestServer | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    // The api instance runs no worker: the subscription is live before processing starts, and the
    // events come from the other instance through the database.
    api = await startTestServer({ ...SETTINGS, PLINTH_PROCESS_ROLES: 'api' }, { database });
  });
  afterAll(async () => {
    await worker?.close();
    await api.close();
    await database.drop();
  });

  it("pushes each state of the owner's file, processed by another instance; a stranger gets nothing", async () => {
    const png = await pngOf(30, 20);
    const output = (await graphql(api.graphqlUrl, UploadAndProcessFileDocument, { input: fileInput(png, 'image/png') }, OWNER)).body.data!.uploadAndProcessFile;
    const ownerClient = subscriptionClient(api.wsUrl, { headers: OWNER });
    const strangerClient = subscriptionClient(api.wsUrl, { headers: STRANGER });
    const forOwner = subscribe(ownerClient, FileProcessingUpdatedDocument, { file_id: output.file_id! });
    const forStranger = subscribe(strangerClient, FileProcessingUpdatedDocument, { file_id: output.file_id! });
    try {
      await Promise.all([forOwner.ready, forStranger.ready]);
      worker = await startTestServer({ ...SETTINGS, PLINTH_PROCESS_ROLES: 'worker' }, { database });
      const first = await forOwner.next();
      expect(first.data!.fileProcessingUpdated).toMatchObject({ id: output.file_id, status: 'PROCESSING', image: null });
      const second = await forOwner.next();
      expect(second.data!.fileProcessingUpdated).toMatchObject({ status: 'COMPLETED', image: { width: 30, height: 20 } });
      await expect(forStranger.next(1000)).rejects.toThrow(/no subscription result/);
    } finally {
      forOwner.dispose();
      forStranger.dispose();
      await ownerClient.dispose();
      await strangerClient.dispose();
    }
  });
});

describe('the uploads quota (RATE_LIMIT_UPLOADS_*, at its default of 100 an hour for each user)', () => {
  const route = (headers: Record<string, string>, input: FileUploadInput) =>
    fetch(`${server.url}/actions/upload-and-process-file`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ADMIN, ...headers },
      body: JSON.stringify({ action: { name: 'uploadAndProcessFile' }, input: { input } }),
    });

  it("refuses a user's 101st upload of the hour with RATE_LIMITED on GraphQL and 429 on the handler route, storing nothing; others go on", async () => {
    const userId = randomUUID();
    const user = bearer(signToken({ userId }));
    const tiny = fileInput(Buffer.from('q'), 'text/plain', 'quota.txt');
    for (let count = 0; count < 50; count++) expect((await upload(tiny, user)).body.data!.uploadAndProcessFile.success).toBe(true);
    // The handler route counts against the same quota, by the user the engine names.
    for (let count = 0; count < 50; count++)
      expect(await (await route({ 'x-gql-role': 'user', 'x-gql-user-id': userId }, tiny)).json()).toMatchObject({ success: true });
    const before = await storedCounts();

    const refused = await upload(tiny, user);
    expect(refused.body.data).toBeNull();
    expect(refused.body.errors).toEqual([
      {
        message: expect.stringMatching(/^Too many uploads: at most 100 per hour for each user; try again in \d+ s$/),
        locations: expect.any(Array),
        path: ['uploadAndProcessFile'],
        extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
      },
    ]);
    const viaRoute = await route({ 'x-gql-role': 'user', 'x-gql-user-id': userId }, tiny);
    expect(viaRoute.status).toBe(429);
    const retryAfter = viaRoute.headers.get('retry-after');
    expect(Number(retryAfter)).toBeGreaterThan(3500);
    expect(await viaRoute.json()).toEqual({
      success: false,
      error: 'rate-limited',
      message: `Too many uploads: at most 100 per hour for each user; try again in ${retryAfter} s`,
      error_code: 'RATE_LIMITED',
    });
    expect(await storedCounts()).toEqual(before);

    // Another user, and the admin role (which quotas never count), still upload.
    expect((await upload(tiny, STRANGER)).body.data!.uploadAndProcessFile.success).toBe(true);
    expect((await upload(tiny, ADMIN)).body.data!.uploadAndProcessFile.success).toBe(true);
  });
});

describe('signed links in production', () => {
  let production: TestServer;
  beforeAll(async () => {
    production = await startTestServer({ ...SETTINGS, ...PRODUCTION }, { database: server.database });
  });
  afterAll(async () => {
    await production.close();
  });

  it('are signed with STORAGE_URL_SIGNING_SECRET alone, nothing derived from the admin secret, and work', async () => {
    const content = Buffer.from('signed in production');
    const output = (await graphql(production.graphqlUrl, UploadAndProcessFileDocument, { input: fileInput(content, 'text/plain') }, OWNER)).body.data!
      .uploadAndProcessFile;
    const link = new URL(output.file_url!);
    const signed = `${link.pathname}\n${link.searchParams.get('expires')}`;
    expect(link.searchParams.get('signature')).toBe(createHmac('sha256', STORAGE_URL_SIGNING_SECRET).update(signed).digest('base64url'));
    const derived = createHmac('sha256', ADMIN_SECRET).update('plinth signed links v1').digest();
    expect(link.searchParams.get('signature')).not.toBe(createHmac('sha256', derived).update(signed).digest('base64url'));
    const fetched = await fetch(link.href.replace(/^http:\/\/localhost:\d+/, production.url));
    expect(fetched.status).toBe(200);
    expect(Buffer.from(await fetched.arrayBuffer()).equals(content)).toBe(true);
  });

  it('are never signed with a key derived from the admin secret, even when the configuration lacks their own', () => {
    const unkeyed = { ...loadConfig(testEnvironment(server.database.url)), env: 'production' as const };
    expect(() => new UrlSigner(unkeyed).sign('/files/x/content', 60)).toThrow(/STORAGE_URL_SIGNING_SECRET/);
    // Outside production the derived key signs.
    expect(new UrlSigner({ ...unkeyed, env: 'development' }).sign('/files/x/content', 60).url).toMatch(/signature=/);
  });
});
