import pino from 'pino';
import { requestLogger } from '../src/http/request-logger';
import { RegisterUserDocument, SessionDocument } from './generated/graphql';
import { graphql } from './support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from './support/server';
import { bearer, signToken } from './support/tokens';

const lines: string[] = [];
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ LOG_LEVEL: 'debug' }, { logTo: { write: (line: string) => void lines.push(line) } });
});
afterAll(async () => {
  await server.close();
});

describe('logs', () => {
  it('never hold a secret: admin secret, token, password, password hash or query-string variables', async () => {
    const password = 'Correct-Horse-Battery-9';
    const token = signToken();
    await graphql(server.graphqlUrl, SessionDocument, {}, { 'x-gql-admin-secret': ADMIN_SECRET });
    await graphql(server.graphqlUrl, SessionDocument, {}, { 'x-gql-admin-secret': 'wrong-secret-guess' });
    await graphql(server.graphqlUrl, SessionDocument, {}, bearer(token));
    await fetch(`${server.graphqlUrl}?query=${encodeURIComponent('{ session { role } }')}&variables=${encodeURIComponent(JSON.stringify({ password }))}`);
    const registered = await graphql(server.graphqlUrl, RegisterUserDocument, { input: { email: 'logs@example.com', password, name: 'L' } });
    expect(registered.body.data!.registerUser.success).toBe(true);
    const [{ password_hash: hash }] = await server.database.query<{ password_hash: string }>('SELECT password_hash FROM users');

    // An unexpected database failure is logged with the error, but not with the statement's values.
    await server.database.query('ALTER TABLE users ADD CONSTRAINT no_more CHECK (false) NOT VALID');
    const failed = await graphql(server.graphqlUrl, RegisterUserDocument, { input: { email: 'fail@example.com', password, name: 'F' } });
    expect(failed.body.data!.registerUser.errors![0].field).toBe('general');

    const log = lines.join('');
    expect(log).toContain('registerUser failed unexpectedly');
    expect(log).toContain('no_more');
    expect(log).toContain('"path":"/v1/graphql"');
    for (const secret of [ADMIN_SECRET, 'wrong-secret-guess', token, password, hash, '$argon2id$']) {
      expect(log).not.toContain(secret);
    }
  });
});

describe('a request logger (made lazily)', () => {
  const logged = (level: string) => {
    const written: Record<string, unknown>[] = [];
    const parent = pino({ level }, { write: (line: string) => void written.push(JSON.parse(line) as Record<string, unknown>) });
    return { parent, written };
  };

  it('writes the lines of enabled levels with the request id, as pino child would, and nothing else', () => {
    const { parent, written } = logged('warn');
    const log = requestLogger(parent, { reqId: 'request-1' }, {}) as pino.Logger;
    log.info('not at warn');
    log.debug({ detail: 1 }, 'not at warn either');
    log.warn({ field: 'x' }, 'written');
    log.error(new Error('boom'));
    expect(written.map((line) => [line.level, line.reqId, line.msg])).toEqual([
      [40, 'request-1', 'written'],
      [50, 'request-1', 'boom'],
    ]);
    expect(written[0].field).toBe('x');
    expect(log.level).toBe('warn');
    expect(log.isLevelEnabled('info')).toBe(false);
  });

  it('keeps the request id in its children and its bindings, and follows a level set on it', () => {
    const { parent, written } = logged('info');
    const log = requestLogger(parent, { reqId: 'request-2' }, {}) as pino.Logger;
    log.child({ module: 'auth' }).info('from a child');
    expect(log.bindings()).toEqual({ reqId: 'request-2' });
    log.level = 'error';
    log.warn('now below the level');
    log.error('at the level');
    expect(written.map((line) => [line.reqId, line.module, line.msg])).toEqual([
      ['request-2', 'auth', 'from a child'],
      ['request-2', undefined, 'at the level'],
    ]);
    // The parent keeps its own level.
    expect(parent.level).toBe('info');
  });

  it('is pino child itself when the route sets its own level', () => {
    const { parent, written } = logged('warn');
    const log = requestLogger(parent, { reqId: 'request-3' }, { level: 'debug' });
    log.debug('route at debug');
    expect(written.map((line) => [line.reqId, line.msg])).toEqual([['request-3', 'route at debug']]);
  });
});
