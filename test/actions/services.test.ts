import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, testEnvironment } from '../support/server';
import { runCli, spawnServer, type SpawnedServer } from '../support/spawn';
import { bearer, signToken } from '../support/tokens';

let folder: string;
let database: TestDatabase;
let port: number;
let fastifyPort: number;
let plinth: SpawnedServer | undefined;

const env = () => ({
  ...testEnvironment(database.url),
  PLINTH_DATA_DIR: path.join(folder, '.data'),
  PLINTH_PLUGINS_DIR: path.join(folder, 'plugins'),
  PLINTH_SERVICES_DIR: path.join(folder, 'services'),
  PLINTH_DIST_DIR: path.join(folder, '.nself', 'dist'),
  PLINTH_PROXY_CONF_DIR: path.join(folder, 'nginx'),
  CS_1: `greeter:express-ts:${port}:/api`,
  CS_1_HOST: '127.0.0.1',
  CS_2: 'ledger:nest-ts:4100:/ledger',
  CS_3: 'mailer:fastapi:4101:/mail',
  CS_4: 'scorer:gin:4102:/score',
  CS_5: 'hooks:plinth:8080:/actions',
  CS_7: `counter:fastify-ts:${fastifyPort}:/count`,
  CS_7_HOST: '127.0.0.1',
  WEBHOOK_SECRET_GITHUB: 'github-webhook-secret',
  // The services get Plinth's environment: spec 1 §8's limit, not the tests' lifted one.
  RATE_LIMIT_ACTION_HANDLERS_POINTS: '5',
});

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`${what} did not happen within ${timeoutMs} ms${plinth ? `:\n${plinth.output()}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

beforeAll(async () => {
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-services-'));
  database = await createTestDatabase();
  port = await freePort();
  fastifyPort = await freePort();
  fs.mkdirSync(path.join(folder, 'metadata'), { recursive: true });
  fs.writeFileSync(path.join(folder, 'metadata', 'version.yaml'), 'version: 3\n');
  fs.writeFileSync(
    path.join(folder, 'metadata', 'actions.graphql'),
    'type Mutation {\n  sayHello(who: String!, mood: Mood): Greeting\n}\n\nenum Mood {\n  GLAD\n  CALM\n}\n\ntype Greeting {\n  text: String!\n  mood: Mood!\n  count: Int!\n}\n',
  );
  fs.writeFileSync(
    path.join(folder, 'metadata', 'actions.yaml'),
    `actions:\n  - name: sayHello\n    definition:\n      kind: synchronous\n      handler: http://greeter:${port}/api/say-hello\n    permissions:\n      - role: user\ncustom_types:\n  enums:\n    - name: Mood\n  objects:\n    - name: Greeting\n`,
  );
});

afterAll(async () => {
  if (plinth && plinth.child.exitCode === null) {
    plinth.child.kill('SIGKILL');
    await plinth.exited;
  }
  await database.drop();
  fs.rmSync(folder, { recursive: true, force: true });
});

it('plinth build scaffolds each declared service that has no folder, with a handler per action routed to it', async () => {
  const built = await runCli(['build'], env(), folder);
  expect(built).toMatchObject({ code: 0 });
  expect(built.stdout).toContain('scaffolded services/greeter (express-ts; sayHello)');
  expect(built.stdout).toContain('scaffolded services/mailer (fastapi; no actions routed to it yet)');
  const greeter = path.join(folder, 'services', 'greeter');
  const handler = fs.readFileSync(path.join(greeter, 'src', 'handlers', 'say-hello.ts'), 'utf8');
  expect(handler).toContain('export async function handleSayHello(args: SayHelloArgs, session: Record<string, string>): Promise<Greeting | null>');
  expect(handler).toContain('return {"text":"TODO","mood":"GLAD","count":0};');
  expect(fs.readFileSync(path.join(greeter, 'src', 'types.ts'), 'utf8')).toContain('export type Mood = "GLAD" | "CALM";');
  expect(fs.readFileSync(path.join(greeter, 'src', 'security.ts'), 'utf8')).toContain('crypto.timingSafeEqual');
  expect(JSON.parse(fs.readFileSync(path.join(greeter, 'package.json'), 'utf8'))).toMatchObject({
    name: 'greeter',
    dependencies: { express: expect.any(String) },
  });
  // The templates plinth start does not run are written as files, with the same checks.
  expect(fs.readFileSync(path.join(folder, 'services', 'ledger', 'src', 'server.ts'), 'utf8')).toContain("@Post('external/:provider')");
  expect(fs.readFileSync(path.join(folder, 'services', 'mailer', 'main.py'), 'utf8')).toContain('hmac.compare_digest');
  expect(fs.readFileSync(path.join(folder, 'services', 'scorer', 'main.go'), 'utf8')).toContain('subtle.ConstantTimeCompare');
  expect(fs.existsSync(path.join(folder, 'services', 'hooks'))).toBe(false);

  // A folder that exists is the project's: never written again.
  fs.writeFileSync(
    path.join(greeter, 'src', 'handlers', 'say-hello.ts'),
    handler.replace(
      'return {"text":"TODO","mood":"GLAD","count":0};',
      'return { text: `hello ${args.who}`, mood: args.mood ?? "CALM", count: Number(session["x-gql-user-id"]?.length ?? 0) };',
    ),
  );
  const again = await runCli(['build'], env(), folder);
  expect(again.stdout).toContain('services/greeter exists: left as it is (sayHello)');
  expect(fs.readFileSync(path.join(greeter, 'src', 'handlers', 'say-hello.ts'), 'utf8')).toContain('hello ${args.who}');

  const bad = await runCli(['build'], { ...env(), CS_6: 'extra:rails:4200:/x' }, folder);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('CS_6 names the template "rails"');
});

it('plinth start runs the express-ts service beside the server, and a declared action is served end to end', async () => {
  plinth = await spawnServer(env(), 60_000);
  await until('the greeter service listening', () => plinth!.output().includes(`[greeter] greeter listening on 127.0.0.1:${port}/api`));
  expect(plinth.output()).toContain('[mailer] template fastapi: not started by plinth start');
  // The fastify-ts template runs too.
  await until('the counter service listening', () => plinth!.output().includes(`[counter] counter listening on 127.0.0.1:${fastifyPort}/count`));
  expect(await (await fetch(`http://127.0.0.1:${fastifyPort}/healthz`)).json()).toEqual({ status: 'ok' });
  const unsigned = await fetch(`http://127.0.0.1:${fastifyPort}/count/external/stripe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  expect(unsigned.status).toBe(401);
  expect(
    await runCli(['metadata', 'apply', '--dir', path.join(folder, 'metadata'), '--endpoint', plinth.url, '--admin-secret', ADMIN_SECRET], env(), folder),
  ).toMatchObject({ code: 0 });

  const userId = 'd7d1e9a4-5b6c-4d7e-8f90-a1b2c3d4e5f6';
  const response = await postGraphQL(
    `${plinth.url}/v1/graphql`,
    { query: 'mutation { sayHello(who: "Ada", mood: GLAD) { text mood count } }' },
    bearer(signToken({ userId, roles: ['user'] })),
  );
  expect(response.body).toEqual({ data: { sayHello: { text: 'hello Ada', mood: 'GLAD', count: userId.length } } });

  const listed = await runCli(['services', 'list', '--json', '--metadata-dir', path.join(folder, 'metadata')], env(), folder);
  const greeter = (JSON.parse(listed.stdout) as { name: string; state: string; url: string; actions: string[] }[]).find((row) => row.name === 'greeter');
  expect(greeter).toMatchObject({ state: 'running', url: `http://greeter:${port}/api/<action>`, actions: ['sayHello'] });
});

it("the scaffold checks the admin secret, limits each user to 5 calls a minute, and checks inbound webhooks' HMAC", async () => {
  const url = `http://127.0.0.1:${port}/api/say-hello`;
  const post = (headers: Record<string, string>) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ action: { name: 'sayHello' }, input: { who: 'Bob' }, session_variables: {} }),
    });
  const refused = await post({ 'x-gql-admin-secret': 'wrong' });
  expect(refused.status).toBe(401);
  expect(await refused.json()).toEqual({ status: 'unauthorized' });
  const statuses: number[] = [];
  let last: Response | undefined;
  for (let call = 0; call < 6; call += 1) {
    last = await post({ 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-user-id': 'rate-limited-user' });
    statuses.push(last.status);
  }
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
  expect((await post({ 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-user-id': 'another-user' })).status).toBe(200);

  const payload = JSON.stringify({ action: 'opened', number: 7 });
  const signature = `sha256=${createHmac('sha256', 'github-webhook-secret').update(payload).digest('hex')}`;
  const hook = (value: string) =>
    fetch(`http://127.0.0.1:${port}/api/external/github`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': value },
      body: payload,
    });
  expect(await (await hook(signature)).json()).toEqual({ status: 'ok' });
  const forged = await hook(signature.replace(/.$/, (last) => (last === '0' ? '1' : '0')));
  expect(forged.status).toBe(401);
});

it('a crashed service is started again, and stopping Plinth stops it', async () => {
  const pid = Number(/\[greeter\] started \(pid (\d+)\)/.exec(plinth!.output())![1]);
  process.kill(pid, 'SIGKILL');
  await until('the restart', () => /\[greeter\] exited \(SIGKILL\); starting it again in \d+ ms/.test(plinth!.output()));
  await until('the greeter answering again', async () => {
    const started = plinth!.output().match(/\[greeter\] started \(pid \d+\)/g) ?? [];
    if (started.length < 2) return undefined;
    return fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.ok,
      () => undefined,
    );
  });
  plinth!.child.kill('SIGTERM');
  expect((await plinth!.exited).code).toBe(0);
  await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
});
