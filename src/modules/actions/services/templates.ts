import type { CustomService } from '../../../config';

/** An action routed to a scaffolded service, with what its handler's code needs. */
export interface ScaffoldAction {
  name: string;
  /** The kebab-case path segment (spec 1 §2.1). */
  path: string;
  arguments: { name: string; type: string; tsType: string }[];
  outputType: string;
  outputTsType: string;
  /** A value that fits the output type, answered until the handler is written. */
  placeholder: unknown;
}

export interface ScaffoldContext {
  service: CustomService;
  actions: ScaffoldAction[];
  /** TypeScript declarations of the custom types (types.ts). */
  typeDeclarations: string;
}

/** A template: the files of a new service, by path under its folder. */
export type Template = (context: ScaffoldContext) => Record<string, string>;

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
const functionName = (action: ScaffoldAction) => `handle${action.name[0].toUpperCase()}${action.name.slice(1)}`;
const route = (service: CustomService) => (service.route === '/' ? '' : service.route);

function readme(context: ScaffoldContext, run: string): string {
  const { service } = context;
  return `# ${service.name}

A custom service of the Plinth project (\`${service.variable}=${service.name}:${service.template}:${service.port}:${service.route}\`),
scaffolded by \`plinth build\`. Plinth never writes to this folder again: it is yours.

- \`POST ${route(service)}/<action>\`: one handler per action routed here, called by Plinth with Hasura's
  payload \`{action, input, session_variables, request_query}\`. Calls without the admin secret
  (\`X-Gql-Admin-Secret\`, compared in constant time with \`GQL_GRAPHQL_ADMIN_SECRET\`) get 401
  \`{"status":"unauthorized"}\`; each user (\`X-Gql-User-Id\`, else the address) may make
  \`RATE_LIMIT_ACTION_HANDLERS_POINTS\` calls per \`RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS\` (5 per 60 s), then 429
  with \`Retry-After\`.
- Answer a business failure with a 4xx and \`{"message": "...", "extensions": {"code": "..."}}\`: the
  GraphQL client gets that message and code.
- \`POST ${route(service)}/external/<provider>\`: inbound webhooks, checked by HMAC-SHA256 of the raw body
  with \`WEBHOOK_SECRET_<PROVIDER>\` against \`X-Hub-Signature-256\` (\`sha256=<hex>\`) or \`X-Signature\`.

Actions: ${context.actions.length ? context.actions.map((action) => `\`${action.name}\``).join(', ') : 'none yet (add a handler per action under the route)'}.

${run}
`;
}

/** The framework-independent checks of the Node templates. */
const SECURITY_TS = `import crypto from 'node:crypto';

const digest = (text: string) => crypto.createHash('sha256').update(text).digest();

/** Constant-time comparison; digests first, so the length of the secret does not show either. */
export function secretsEqual(given: string, expected: string): boolean {
  return expected !== '' && crypto.timingSafeEqual(digest(given), digest(expected));
}

/** Plinth sends its admin secret with every call to a declared CS_<N> service (spec 1 §5.2). */
export function adminSecretValid(header: string | string[] | undefined): boolean {
  return typeof header === 'string' && secretsEqual(header, process.env.GQL_GRAPHQL_ADMIN_SECRET ?? '');
}

/** The reference limiter of spec 1 §8: \`points\` calls per \`durationSeconds\` per user. */
export class RateLimiter {
  private readonly hits = new Map<string, number[]>();

  constructor(
    readonly points = Number(process.env.RATE_LIMIT_ACTION_HANDLERS_POINTS ?? 5),
    readonly durationSeconds = Number(process.env.RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS ?? 60),
  ) {}

  /** Counts a call of \`key\`; answers the seconds to wait when it is over the limit (the call is then not counted), else 0. */
  take(key: string, now = Date.now()): number {
    const since = now - this.durationSeconds * 1000;
    const recent = (this.hits.get(key) ?? []).filter((at) => at > since);
    if (recent.length >= this.points) {
      this.hits.set(key, recent);
      return Math.max(1, Math.ceil((recent[0] - since) / 1000));
    }
    recent.push(now);
    this.hits.set(key, recent);
    if (this.hits.size > 100_000) {
      for (const [caller, times] of this.hits) if (times.every((at) => at <= since)) this.hits.delete(caller);
    }
    return 0;
  }
}

/** The signature header of an inbound webhook (GitHub's X-Hub-Signature-256, or X-Signature). */
export function signatureOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['x-hub-signature-256'] ?? headers['x-signature'];
  return typeof value === 'string' ? value : undefined;
}

/** HMAC-SHA256 (hex) of the raw body with WEBHOOK_SECRET_<PROVIDER>, compared in constant time (spec 1 §5.3). */
export function webhookSignatureValid(provider: string, rawBody: Buffer, signature: string | undefined): boolean {
  const secret = process.env[\`WEBHOOK_SECRET_\${provider.toUpperCase().replace(/[^A-Z0-9]/g, '_')}\`];
  if (!secret || signature === undefined) return false;
  const expected = crypto.createHmac('sha256', secret).update(rawBody).digest('hex');
  const given = signature.startsWith('sha256=') ? signature.slice('sha256='.length) : signature;
  return secretsEqual(given.toLowerCase(), expected);
}
`;

/** The handlers of the Node templates: one file per action and an index by path. */
function nodeHandlers(context: ScaffoldContext): Record<string, string> {
  const files: Record<string, string> = { 'src/types.ts': context.typeDeclarations };
  for (const action of context.actions) {
    const outputName = action.outputTsType.replace(/ \| null$/, '').replace(/\[\]$/, '');
    const imported = /^[A-Z]\w*$/.test(outputName) ? outputName : undefined;
    const argumentTypes = action.arguments.map((argument) => argument.tsType).join(' ');
    const typeNames = [...new Set([imported, ...(argumentTypes.match(/\b[A-Z]\w*\b/g) ?? [])].filter((name): name is string => !!name))];
    files[`src/handlers/${action.path}.ts`] = `${typeNames.length ? `import type { ${typeNames.join(', ')} } from '../types';\n\n` : ''}export interface ${action.name[0].toUpperCase()}${action.name.slice(1)}Args {
${action.arguments.map((argument) => `  ${argument.name}${argument.type.endsWith('!') ? '' : '?'}: ${argument.tsType};`).join('\n')}
}

/**
 * The ${action.name} action: \`args\` are its GraphQL arguments, \`session\` the caller's session
 * variables (x-gql-role, x-gql-user-id...). The answer must fit its output type, ${action.outputType}.
 */
export async function ${functionName(action)}(args: ${action.name[0].toUpperCase()}${action.name.slice(1)}Args, session: Record<string, string>): Promise<${action.outputTsType}> {
  void args;
  void session;
  // TODO: the business logic; throw an ActionError for a 4xx the client sees.
  return ${JSON.stringify(action.placeholder)};
}
`;
  }
  files['src/handlers/index.ts'] = `${context.actions.map((action) => `import { ${functionName(action)} } from './${action.path}';`).join('\n')}${context.actions.length ? '\n\n' : ''}// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Handler = (args: any, session: Record<string, string>) => Promise<unknown>;

/** A refusal the GraphQL client sees: its message and code (spec 1 §7). */
export class ActionError extends Error {
  constructor(
    message: string,
    readonly code = 'BAD_REQUEST',
    readonly status = 400,
  ) {
    super(message);
  }
}

/** The handlers by path segment (the kebab-case action name). */
export const handlers: Record<string, Handler> = {
${context.actions.map((action) => `  '${action.path}': ${functionName(action)},`).join('\n')}
};
`;
  files['src/security.ts'] = SECURITY_TS;
  return files;
}

function nodePackage(context: ScaffoldContext, dependencies: Record<string, string>, devDependencies: Record<string, string>): Record<string, string> {
  return {
    'package.json': json({
      name: context.service.name,
      private: true,
      version: '0.1.0',
      scripts: { build: 'tsc -p tsconfig.json', start: 'node dist/server.js' },
      dependencies,
      devDependencies: { typescript: '^5.9.0', '@types/node': '^20.0.0', ...devDependencies },
    }),
    'tsconfig.json': json({
      compilerOptions: { target: 'ES2022', module: 'commonjs', rootDir: 'src', outDir: 'dist', strict: true, esModuleInterop: true, skipLibCheck: true, experimentalDecorators: true, emitDecoratorMetadata: true },
      include: ['src'],
    }),
    '.gitignore': 'node_modules/\ndist/\n',
  };
}

const settingsTs = (service: CustomService) => `const port = Number(process.env.PORT ?? ${service.port});
const host = process.env.HOST ?? '0.0.0.0';
const route = (process.env.SERVICE_ROUTE ?? ${JSON.stringify(route(service))}).replace(/\\/+$/, '');
const limiter = new RateLimiter();`;

const expressTs: Template = (context) => ({
  ...nodePackage(context, { express: '^5.1.0' }, { '@types/express': '^5.0.0' }),
  ...nodeHandlers(context),
  'src/server.ts': `import express, { type NextFunction, type Request, type Response } from 'express';
import { ActionError, handlers } from './handlers';
import { adminSecretValid, RateLimiter, signatureOf, webhookSignatureValid } from './security';

${settingsTs(context.service)}
const app = express();
app.disable('x-powered-by');
// The raw bytes are kept: webhook signatures are computed over them, not over re-serialised JSON.
app.use(express.json({ limit: '1mb', verify: (request, _response, buffer) => void ((request as unknown as { rawBody: Buffer }).rawBody = buffer) }));

app.get('/healthz', (_request, response) => {
  response.json({ status: 'ok' });
});

app.post(\`\${route}/external/:provider\`, (request: Request<{ provider: string }>, response) => {
  const rawBody = (request as unknown as { rawBody?: Buffer }).rawBody ?? Buffer.alloc(0);
  if (!webhookSignatureValid(request.params.provider, rawBody, signatureOf(request.headers))) {
    response.status(401).json({ status: 'unauthorized' });
    return;
  }
  // TODO: act on the provider's event (request.body).
  response.json({ status: 'ok' });
});

for (const [path, handle] of Object.entries(handlers)) {
  app.post(\`\${route}/\${path}\`, async (request, response) => {
    if (!adminSecretValid(request.headers['x-gql-admin-secret'])) {
      response.status(401).json({ status: 'unauthorized' });
      return;
    }
    const wait = limiter.take(String(request.headers['x-gql-user-id'] ?? request.ip));
    if (wait > 0) {
      response.setHeader('Retry-After', String(wait));
      response.status(429).json({ message: 'too many requests: try again later', extensions: { code: 'RATE_LIMITED' } });
      return;
    }
    const body = (request.body ?? {}) as { input?: unknown; session_variables?: Record<string, string> };
    try {
      response.json(await handle(body.input ?? {}, body.session_variables ?? {}));
    } catch (error) {
      if (error instanceof ActionError) {
        response.status(error.status).json({ message: error.message, extensions: { code: error.code } });
        return;
      }
      console.error(error);
      response.status(500).json({ success: false, message: 'unexpected error' });
    }
  });
}

// A body that is not JSON: 400, not a stack trace.
app.use((error: Error & { status?: number }, _request: Request, response: Response, next: NextFunction) => {
  if (response.headersSent) return next(error);
  response.status(error.status && error.status < 500 ? error.status : 500).json({ success: false, message: error.status && error.status < 500 ? error.message : 'unexpected error' });
});

app.listen(port, host, () => console.log(\`${context.service.name} listening on \${host}:\${port}\${route}\`));
`,
  'README.md': readme(context, 'Run it with `plinth start` (it compiles `src/` and starts it beside Plinth), or `npm install && npm run build && npm start`.'),
});

const fastifyTs: Template = (context) => ({
  ...nodePackage(context, { fastify: '^5.0.0' }, {}),
  ...nodeHandlers(context),
  'src/server.ts': `import Fastify from 'fastify';
import { ActionError, handlers } from './handlers';
import { adminSecretValid, RateLimiter, signatureOf, webhookSignatureValid } from './security';

${settingsTs(context.service)}
const app = Fastify({ bodyLimit: 1024 * 1024 });

// The raw bytes are kept: webhook signatures are computed over them, not over re-serialised JSON.
app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
  (request as unknown as { rawBody: Buffer }).rawBody = body as Buffer;
  try {
    done(null, (body as Buffer).length ? JSON.parse((body as Buffer).toString('utf8')) : {});
  } catch {
    done(Object.assign(new Error('the body is not valid JSON'), { statusCode: 400 }), undefined);
  }
});

app.get('/healthz', async () => ({ status: 'ok' }));

app.post<{ Params: { provider: string } }>(\`\${route}/external/:provider\`, async (request, reply) => {
  const rawBody = (request as unknown as { rawBody?: Buffer }).rawBody ?? Buffer.alloc(0);
  if (!webhookSignatureValid(request.params.provider, rawBody, signatureOf(request.headers))) return reply.code(401).send({ status: 'unauthorized' });
  // TODO: act on the provider's event (request.body).
  return { status: 'ok' };
});

for (const [path, handle] of Object.entries(handlers)) {
  app.post(\`\${route}/\${path}\`, async (request, reply) => {
    if (!adminSecretValid(request.headers['x-gql-admin-secret'])) return reply.code(401).send({ status: 'unauthorized' });
    const wait = limiter.take(String(request.headers['x-gql-user-id'] ?? request.ip));
    if (wait > 0) return reply.code(429).header('Retry-After', String(wait)).send({ message: 'too many requests: try again later', extensions: { code: 'RATE_LIMITED' } });
    const body = (request.body ?? {}) as { input?: unknown; session_variables?: Record<string, string> };
    try {
      return await handle(body.input ?? {}, body.session_variables ?? {});
    } catch (error) {
      if (error instanceof ActionError) return reply.code(error.status).send({ message: error.message, extensions: { code: error.code } });
      request.log.error(error);
      return reply.code(500).send({ success: false, message: 'unexpected error' });
    }
  });
}

app.listen({ port, host }).then(() => console.log(\`${context.service.name} listening on \${host}:\${port}\${route}\`));
`,
  'README.md': readme(context, 'Run it with `plinth start` (it compiles `src/` and starts it beside Plinth), or `npm install && npm run build && npm start`.'),
});

const nestTs: Template = (context) => ({
  ...nodePackage(
    context,
    { '@nestjs/common': '^11.0.0', '@nestjs/core': '^11.0.0', '@nestjs/platform-express': '^11.0.0', 'reflect-metadata': '^0.2.0', rxjs: '^7.8.0' },
    {},
  ),
  ...nodeHandlers(context),
  'src/server.ts': `import 'reflect-metadata';
import { Body, Controller, Headers, HttpException, Module, Param, Post, Req } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ActionError, handlers } from './handlers';
import { adminSecretValid, RateLimiter, signatureOf, webhookSignatureValid } from './security';

${settingsTs(context.service)}

@Controller(route.replace(/^\\//, ''))
class ActionsController {
  @Post('external/:provider')
  external(@Param('provider') provider: string, @Req() request: { rawBody?: Buffer; headers: Record<string, string | string[] | undefined> }) {
    if (!webhookSignatureValid(provider, request.rawBody ?? Buffer.alloc(0), signatureOf(request.headers))) throw new HttpException({ status: 'unauthorized' }, 401);
    // TODO: act on the provider's event.
    return { status: 'ok' };
  }

  @Post(':action')
  async action(
    @Param('action') path: string,
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: { input?: unknown; session_variables?: Record<string, string> },
    @Req() request: { ip?: string },
  ) {
    const handle = handlers[path];
    if (!handle) throw new HttpException({ message: 'no such action' }, 404);
    if (!adminSecretValid(headers['x-gql-admin-secret'])) throw new HttpException({ status: 'unauthorized' }, 401);
    const wait = limiter.take(String(headers['x-gql-user-id'] ?? request.ip));
    if (wait > 0) throw new HttpException({ message: \`too many requests: try again in \${wait} s\`, extensions: { code: 'RATE_LIMITED' } }, 429);
    try {
      return await handle(body.input ?? {}, body.session_variables ?? {});
    } catch (error) {
      if (error instanceof ActionError) throw new HttpException({ message: error.message, extensions: { code: error.code } }, error.status);
      console.error(error);
      throw new HttpException({ success: false, message: 'unexpected error' }, 500);
    }
  }
}

@Module({ controllers: [ActionsController] })
class AppModule {}

NestFactory.create(AppModule, { rawBody: true }).then((app) => app.listen(port, host));
`,
  'README.md': readme(context, 'Run it with `npm install && npm run build && npm start` (`plinth start` runs express-ts and fastify-ts services only).'),
});

const fastapi: Template = (context) => ({
  'requirements.txt': 'fastapi>=0.110\nuvicorn>=0.29\n',
  'main.py': `"""${context.service.name}: a custom service of the Plinth project (scaffolded by plinth build)."""
import hashlib
import hmac
import os
import re
import time
from collections import defaultdict, deque

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROUTE = os.environ.get("SERVICE_ROUTE", ${JSON.stringify(route(context.service))}).rstrip("/")
POINTS = int(os.environ.get("RATE_LIMIT_ACTION_HANDLERS_POINTS", "5"))
DURATION = int(os.environ.get("RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS", "60"))
_hits: dict[str, deque] = defaultdict(deque)

app = FastAPI()


def secrets_equal(given: str, expected: str) -> bool:
    return expected != "" and hmac.compare_digest(hashlib.sha256(given.encode()).digest(), hashlib.sha256(expected.encode()).digest())


def wait_seconds(key: str) -> int:
    """Spec 1 section 8: POINTS calls per DURATION seconds per user; the seconds to wait, or 0."""
    now = time.monotonic()
    hits = _hits[key]
    while hits and hits[0] <= now - DURATION:
        hits.popleft()
    if len(hits) >= POINTS:
        return max(1, int(hits[0] + DURATION - now) + 1)
    hits.append(now)
    return 0

${context.actions
  .map(
    (action) => `
async def ${action.name}(args: dict, session: dict):
    """The ${action.name} action; the answer must fit ${action.outputType}."""
    # TODO: the business logic.
    return ${JSON.stringify(action.placeholder).replace(/\bnull\b/g, 'None').replace(/\btrue\b/g, 'True').replace(/\bfalse\b/g, 'False')}
`,
  )
  .join('')}
HANDLERS = {${context.actions.map((action) => `"${action.path}": ${action.name}`).join(', ')}}


@app.post(ROUTE + "/external/{provider}")
async def external(provider: str, request: Request):
    raw = await request.body()
    secret = os.environ.get("WEBHOOK_SECRET_" + re.sub(r"[^A-Z0-9]", "_", provider.upper()), "")
    signature = request.headers.get("x-hub-signature-256") or request.headers.get("x-signature") or ""
    signature = signature[len("sha256="):] if signature.startswith("sha256=") else signature
    expected = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    if not secret or not secrets_equal(signature.lower(), expected):
        return JSONResponse({"status": "unauthorized"}, status_code=401)
    return {"status": "ok"}


@app.post(ROUTE + "/{action}")
async def action(action: str, request: Request):
    handle = HANDLERS.get(action)
    if handle is None:
        return JSONResponse({"message": "no such action"}, status_code=404)
    if not secrets_equal(request.headers.get("x-gql-admin-secret", ""), os.environ.get("GQL_GRAPHQL_ADMIN_SECRET", "")):
        return JSONResponse({"status": "unauthorized"}, status_code=401)
    wait = wait_seconds(request.headers.get("x-gql-user-id") or (request.client.host if request.client else ""))
    if wait:
        return JSONResponse({"message": "too many requests", "extensions": {"code": "RATE_LIMITED"}}, status_code=429, headers={"Retry-After": str(wait)})
    body = await request.json()
    return await handle(body.get("input", {}), body.get("session_variables", {}))
`,
  'README.md': readme(context, `Run it with \`pip install -r requirements.txt && uvicorn main:app --port ${context.service.port}\`.`),
});

const gin: Template = (context) => ({
  'go.mod': `module ${context.service.name}\n\ngo 1.22\n\nrequire github.com/gin-gonic/gin v1.10.0\n`,
  'main.go': `// ${context.service.name}: a custom service of the Plinth project (scaffolded by plinth build).
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func secretsEqual(given, expected string) bool {
	a := sha256.Sum256([]byte(given))
	b := sha256.Sum256([]byte(expected))
	return expected != "" && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// limiter: spec 1 section 8, points calls per duration per user.
type limiter struct {
	mu       sync.Mutex
	hits     map[string][]time.Time
	points   int
	duration time.Duration
}

func (l *limiter) take(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	recent := []time.Time{}
	for _, at := range l.hits[key] {
		if now.Sub(at) < l.duration {
			recent = append(recent, at)
		}
	}
	if len(recent) >= l.points {
		l.hits[key] = recent
		return int(l.duration.Seconds()-now.Sub(recent[0]).Seconds()) + 1
	}
	l.hits[key] = append(recent, now)
	return 0
}

type envelope struct {
	Input            map[string]any    \`json:"input"\`
	SessionVariables map[string]string \`json:"session_variables"\`
}

var handlers = map[string]func(envelope) (any, error){
${context.actions.map((action) => `	// ${action.name}: the answer must fit ${action.outputType}. TODO: the business logic.\n	"${action.path}": func(request envelope) (any, error) { return ${goLiteral(action.placeholder)}, nil },`).join('\n')}
}

func main() {
	route := strings.TrimRight(env("SERVICE_ROUTE", ${JSON.stringify(route(context.service))}), "/")
	points, _ := strconv.Atoi(env("RATE_LIMIT_ACTION_HANDLERS_POINTS", "5"))
	seconds, _ := strconv.Atoi(env("RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS", "60"))
	limit := &limiter{hits: map[string][]time.Time{}, points: points, duration: time.Duration(seconds) * time.Second}
	unsafe := regexp.MustCompile("[^A-Z0-9]")
	router := gin.Default()
	router.POST(route+"/external/:provider", func(c *gin.Context) {
		raw, _ := io.ReadAll(c.Request.Body)
		secret := os.Getenv("WEBHOOK_SECRET_" + unsafe.ReplaceAllString(strings.ToUpper(c.Param("provider")), "_"))
		signature := c.GetHeader("X-Hub-Signature-256")
		if signature == "" {
			signature = c.GetHeader("X-Signature")
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(raw)
		if secret == "" || !secretsEqual(strings.ToLower(strings.TrimPrefix(signature, "sha256=")), hex.EncodeToString(mac.Sum(nil))) {
			c.JSON(http.StatusUnauthorized, gin.H{"status": "unauthorized"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ok"})
	})
	router.POST(route+"/:action", func(c *gin.Context) {
		handle, found := handlers[c.Param("action")]
		if !found {
			c.JSON(http.StatusNotFound, gin.H{"message": "no such action"})
			return
		}
		if !secretsEqual(c.GetHeader("X-Gql-Admin-Secret"), os.Getenv("GQL_GRAPHQL_ADMIN_SECRET")) {
			c.JSON(http.StatusUnauthorized, gin.H{"status": "unauthorized"})
			return
		}
		key := c.GetHeader("X-Gql-User-Id")
		if key == "" {
			key = c.ClientIP()
		}
		if wait := limit.take(key); wait > 0 {
			c.Header("Retry-After", strconv.Itoa(wait))
			c.JSON(http.StatusTooManyRequests, gin.H{"message": "too many requests", "extensions": gin.H{"code": "RATE_LIMITED"}})
			return
		}
		var request envelope
		if err := c.ShouldBindJSON(&request); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"message": "the body is not a valid action payload"})
			return
		}
		result, err := handle(request)
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"success": false, "message": "unexpected error"})
			return
		}
		c.JSON(http.StatusOK, result)
	})
	router.Run(":" + env("PORT", "${context.service.port}"))
}
`,
  'README.md': readme(context, `Run it with \`go mod tidy && go run .\`.`),
});

function goLiteral(value: unknown): string {
  if (value === null || value === undefined) return 'nil';
  if (Array.isArray(value)) return '[]any{}';
  if (typeof value === 'object') return `gin.H{${Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}: ${goLiteral(item)}`).join(', ')}}`;
  return JSON.stringify(value);
}

/** The scaffold templates, by the name `CS_<N>` gives. */
export const TEMPLATES: Record<string, Template> = {
  'express-ts': expressTs,
  'fastify-ts': fastifyTs,
  'nest-ts': nestTs,
  fastapi,
  gin,
};
