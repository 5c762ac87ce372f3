import net from 'node:net';
import { print } from 'graphql';
import { UploadAndProcessFileDocument } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/**
 * Chunked bodies (Transfer-Encoding: chunked, no Content-Length) at the default limits
 * (GQL_GRAPHQL_BODY_LIMIT 1 MiB, FILES_MAX_BYTES 10 MiB): only a signed-in caller's upload may go
 * past the body limit, so anyone else's body stops being read there.
 */
const BODY_LIMIT = 1024 * 1024;
const BODY_BYTES = 3_000_000;
const CHUNK_BYTES = 32 * 1024;
const OWNER = bearer(signToken({ userId: '0b6c9a52-3e59-4a1f-8a0e-52b1c1d2e3f4' }));

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' });
});
afterAll(async () => {
  await server.close();
});

interface Sent {
  status: number;
  body: string;
  /** Body bytes written when the answer's first bytes arrived (all of them if it came after). */
  sentWhenAnswered: number;
  /** Whether the answer came before the body's last chunk was sent. */
  answeredBeforeEnd: boolean;
}

/**
 * POSTs `body` in chunks over a socket of its own, a chunk at a time with a pause between them, and
 * stops sending as soon as an answer arrives. After the last data chunk it waits up to a second
 * for an answer before sending the terminating chunk: a server that reads the whole body answers
 * only after that.
 */
function sendChunked(path: string, body: Buffer, headers: Record<string, string> = {}, method = 'POST'): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    let answer = '';
    let sent = 0;
    let sentWhenAnswered: number | undefined;
    let ended = false;
    // The server may reset a connection whose body it stopped reading; the answer is what counts.
    socket.on('error', (error: NodeJS.ErrnoException) => (['ECONNRESET', 'EPIPE'].includes(error.code ?? '') ? undefined : reject(error)));
    socket.on('data', (data) => {
      sentWhenAnswered ??= sent;
      answer += data.toString('utf8');
    });
    const finish = () => {
      socket.destroy();
      const [head, text = ''] = answer.split('\r\n\r\n');
      // The answer's own chunked framing, if any, is left out: one JSON object is all it holds.
      const json = text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1);
      resolve({ status: Number(head.slice(9, 12)), body: json, sentWhenAnswered: sentWhenAnswered ?? sent, answeredBeforeEnd: !ended });
    };
    const head = Object.entries({ host: 'localhost', 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...headers })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n`);
    const sendNext = () => {
      if (sentWhenAnswered !== undefined) return setTimeout(finish, 50);
      if (sent >= body.length) {
        // Time for an answer that does not need the end of the body; then the end, and its answer.
        return setTimeout(() => {
          if (sentWhenAnswered !== undefined) return finish();
          ended = true;
          socket.write('0\r\n\r\n');
          const waitForAnswer = () => (answer.includes('\r\n\r\n') && answer.trimEnd().endsWith('}') ? finish() : setTimeout(waitForAnswer, 20));
          waitForAnswer();
        }, 1000);
      }
      const chunk = body.subarray(sent, sent + CHUNK_BYTES);
      sent += chunk.length;
      socket.write(`${chunk.length.toString(16)}\r\n`);
      socket.write(chunk);
      socket.write('\r\n', () => setTimeout(sendNext, 2));
    };
    socket.on('connect', sendNext);
  });
}

/** A GraphQL request of `bytes` bytes: a query with a long string variable. */
function paddedGraphQLBody(bytes: number): Buffer {
  const prefix = '{"query":"query Padded($pad: String) { __typename }","variables":{"pad":"';
  const suffix = '"}}';
  return Buffer.from(prefix + 'x'.repeat(bytes - prefix.length - suffix.length) + suffix);
}

describe('a chunked body past GQL_GRAPHQL_BODY_LIMIT', () => {
  it('from an anonymous caller gets 413 as soon as the limit is passed, before the rest is sent (never read whole nor parsed)', async () => {
    const sent = await sendChunked('/v1/graphql', paddedGraphQLBody(BODY_BYTES));
    expect(sent.status).toBe(413);
    expect(JSON.parse(sent.body)).toEqual({
      errors: [{ message: expect.stringContaining('GQL_GRAPHQL_BODY_LIMIT'), extensions: { code: 'PAYLOAD_TOO_LARGE' } }],
    });
    expect(sent.answeredBeforeEnd).toBe(true);
    expect(sent.sentWhenAnswered).toBeGreaterThan(BODY_LIMIT);
    expect(sent.sentWhenAnswered).toBeLessThan(2 * BODY_LIMIT);
  });

  it('from a caller whose credentials are refused is treated as anonymous', async () => {
    const sent = await sendChunked('/v1/graphql', paddedGraphQLBody(BODY_BYTES), { authorization: 'Bearer not-a-token' });
    expect([sent.status, sent.answeredBeforeEnd]).toEqual([413, true]);
  });

  it('from a signed-in caller is read to the end: an upload mutation of 2 MB is stored', async () => {
    const content = Buffer.alloc(2_000_000, 'chunked ');
    const request = {
      query: print(UploadAndProcessFileDocument),
      variables: { input: { file_name: 'chunked.txt', file_type: 'text/plain', file_size: content.length, file_data: content.toString('base64') } },
    };
    const sent = await sendChunked('/v1/graphql', Buffer.from(JSON.stringify(request)), OWNER);
    expect(sent.status).toBe(200);
    expect(sent.answeredBeforeEnd).toBe(false);
    expect(JSON.parse(sent.body)).toMatchObject({ data: { uploadAndProcessFile: { success: true, errors: null } } });
    // The same request declared with Content-Length takes the same way.
    const declared = await graphql(server.graphqlUrl, UploadAndProcessFileDocument, request.variables, OWNER);
    expect(declared.body.data!.uploadAndProcessFile.success).toBe(true);
  });

  it('from a signed-in caller that is no upload is refused once read, as before', async () => {
    const sent = await sendChunked('/v1/graphql', paddedGraphQLBody(BODY_BYTES), OWNER);
    expect(sent.status).toBe(413);
  });
});

describe('every route that takes a body', () => {
  it('stops reading an anonymous chunked body far past its limit and answers before the rest is sent', async () => {
    const routes = server.server.app.routeTable.flatMap((route) =>
      [route.method]
        .flat()
        .filter((method) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method))
        .map((method) => ({ method, url: route.url })),
    );
    expect(routes.length).toBeGreaterThan(30);
    const answers: string[] = [];
    for (const { method, url } of routes) {
      const sent = await sendChunked(url.replace(/:(\w+)/g, '1'), paddedGraphQLBody(BODY_BYTES), {}, method);
      const inTime = sent.answeredBeforeEnd && sent.sentWhenAnswered <= 2 * BODY_LIMIT;
      answers.push(
        `${method} ${url}: ${sent.status}${inTime ? '' : ` only after ${sent.sentWhenAnswered} bytes${sent.answeredBeforeEnd ? '' : ' and the end'}`}`,
      );
    }
    // A refusal, in time; the OAuth callback tells every refusal as a redirect to the application.
    expect(answers.filter((answer) => !/: 4\d\d$/.test(answer) && answer !== 'POST /auth/signin/provider/:provider/callback: 302')).toEqual([]);
  });
});
