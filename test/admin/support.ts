import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DestinationStream } from 'pino';
import { PasswordHasher } from '../../src/common/passwords';
import type { AnyModule } from '../../src/platform/module';
import type { TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { startTestServer, TEST_PASSWORD_HASH, type TestServer } from '../support/server';

export const ADMIN_PASSWORD = 'a dashboard password of some length';

/** The argon2id hash of `password` at the test suite's cost, as PLATFORM_ADMIN_PASSWORD holds it. */
export function adminPasswordHash(password = ADMIN_PASSWORD): Promise<string> {
  return new PasswordHasher({
    memoryKib: Number(TEST_PASSWORD_HASH.AUTH_PASSWORD_HASH_MEMORY_KIB),
    iterations: Number(TEST_PASSWORD_HASH.AUTH_PASSWORD_HASH_ITERATIONS),
    parallelism: 1,
  }).hash(password);
}

export interface AdminTestServer extends TestServer {
  /** The dashboard's address: http://127.0.0.1:<PLATFORM_ADMIN_PORT>. */
  adminUrl: string;
  /** PLATFORM_PROJECT_PATH: a folder of its own, whose .env the config route writes. */
  project: string;
}

/** The real server with the dashboard on, on a free port, with a project folder of its own. */
export async function startAdminServer(
  overrides: Record<string, string> = {},
  options: { database?: TestDatabase; logTo?: DestinationStream; modules?: AnyModule[]; project?: string } = {},
): Promise<AdminTestServer> {
  const port = overrides.PLATFORM_ADMIN_PORT ?? String(await freePort());
  const project = options.project ?? fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-admin-'));
  const server = await startTestServer(
    {
      PLATFORM_ADMIN_ENABLED: 'true',
      PLATFORM_ADMIN_PORT: port,
      PLATFORM_ADMIN_PASSWORD: await adminPasswordHash(),
      PLATFORM_PROJECT_PATH: project,
      PLATFORM_ADMIN_LOGIN_DELAY_MS: '300',
      ...overrides,
    },
    options,
  );
  return { ...server, adminUrl: `http://127.0.0.1:${port}`, project };
}

export interface Answer<T = Record<string, unknown>> {
  status: number;
  body: T;
  headers: Headers;
}

/** A client of the dashboard's API keeping its session cookie and CSRF token, as a browser page would. */
export class AdminClient {
  cookie: string | undefined;
  csrfToken: string | undefined;

  constructor(readonly baseUrl: string) {}

  async login(body: Record<string, unknown> = { username: 'admin', password: ADMIN_PASSWORD }): Promise<Answer> {
    const answer = await this.request('POST', '/api/auth/login', body);
    if (answer.status === 200) {
      const cookie = answer.headers.getSetCookie().find((value) => value.startsWith('plinth_admin_session='));
      this.cookie = cookie?.split(';')[0];
      this.csrfToken = answer.body.csrfToken as string;
    }
    return answer;
  }

  /** A request with the session cookie and, for a change, the CSRF token (unless `headers` say otherwise). */
  async request<T = Record<string, unknown>>(method: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer<T>> {
    const sent: Record<string, string> = {};
    if (this.cookie) sent.cookie = this.cookie;
    if (this.csrfToken && method !== 'GET') sent['x-csrf-token'] = this.csrfToken;
    if (body !== undefined) sent['content-type'] = 'application/json';
    const response = await fetch(`${this.baseUrl}${route}`, {
      method,
      headers: { ...sent, ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: kept as text
    }
    return { status: response.status, body: parsed as T, headers: response.headers };
  }
}
