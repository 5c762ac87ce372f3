import net from 'node:net';
import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { integer, nonEmpty, oneLine, baseUrl, distinctList } from './validators';

/**
 * Which peers may set X-Forwarded-For: `true` (every peer), a hop count (that many proxies in
 * front, whatever their address), or a comma-separated list of addresses, CIDR ranges and the
 * names loopback, linklocal and uniquelocal. Off by default: the client address is the peer's.
 */
export type TrustProxy = boolean | number | string[];

export const TRUSTED_PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'] as const;

function isAddressOrRange(entry: string): boolean {
  if ((TRUSTED_PROXY_NAMES as readonly string[]).includes(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = net.isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

const trustProxy = z
  .string()
  .trim()
  .transform((value): TrustProxy => {
    if (value === 'true' || value === 'false') return value === 'true';
    if (/^\d+$/.test(value)) return Number(value);
    return value.split(',').map((entry) => entry.trim());
  })
  .refine((value) => typeof value !== 'number' || value <= 100, { error: 'must be at most 100 hops' })
  .refine((value) => !Array.isArray(value) || value.every(isAddressOrRange), {
    error: 'must be true, false, a hop count, or a comma-separated list of addresses and CIDR ranges such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal)',
  });

const PROCESS_ROLES = ['api', 'worker'] as const;
export type ProcessRole = (typeof PROCESS_ROLES)[number];

export const serverVariables = {
  NODE_ENV: z
    .enum(['development', 'production', 'test'])
    .default('development')
    .describe('`production` requires the secrets (see the README) and refuses what is fit for development only (mail to files, generated secrets)'),
  HOST: nonEmpty.default('0.0.0.0').describe('the address the server listens on'),
  PORT: integer(0, 65535).default(8080).describe('the port the server listens on'),
  PLINTH_PUBLIC_URL: baseUrl.optional().meta({
    description: 'where users reach the server; every link in a mail is built on it',
    unset: '`http://localhost:<PORT>`',
  }),
  TRUST_PROXY: trustProxy
    .default(false)
    .describe(
      "which proxies' `X-Forwarded-For` gives the client address: `true`, a hop count, or addresses/CIDRs (and `loopback`, `linklocal`, `uniquelocal`), comma-separated",
    ),
  // Node's own default, which Fastify turns off (0): a request must arrive whole within it (docs/decisions.md).
  HTTP_REQUEST_TIMEOUT_SECONDS: integer(0, 86_400)
    .default(300)
    .describe('time a caller has to send a whole request, headers and body (408 after it); `0`: no bound. Raise it for large uploads over slow links'),
  // Code that walks a request's JSON recursively (its variables' cost, text checks) overflows the stack on deep nesting.
  REQUEST_MAX_JSON_DEPTH: integer(2, 1000)
    .default(64)
    .describe('how deep objects and arrays may nest in a REST body or in GraphQL variables (HTTP and WebSocket); deeper is 400 `JSON_TOO_DEEP`'),
  PLINTH_SHUTDOWN_TIMEOUT_MS: integer(0, 600_000).default(10_000).describe('the longest a shutdown may take, all of it, before the process exits'),
  PLINTH_PROCESS_ROLES: z
    .string()
    .default('api,worker')
    .transform(distinctList)
    .refine((roles) => roles.length > 0 && roles.every((role) => (PROCESS_ROLES as readonly string[]).includes(role)), {
      error: 'must be api, worker or api,worker',
    })
    .transform((roles) => roles as ProcessRole[])
    .describe(
      '`api` serves requests (and sends jobs), `worker` runs the job workers and the recurring tasks (clean-ups, checks, scheduled sends: each run by one worker of all); a worker-only process serves `/healthz`, `/readyz` and `/metrics` only',
    ),
  PLINTH_PROJECT_NAME: oneLine.default('Plinth').describe("the project's name, in the API reference's title"),
};

/** PLINTH_PUBLIC_URL, else this server on localhost: every link Plinth sends is under it or AUTH_SERVER_URL. */
export function publicUrlOf(values: Environment): string {
  return values.PLINTH_PUBLIC_URL ?? `http://localhost:${values.PORT}`;
}

export const server = {
  name: 'server',
  title: 'Server and processes',
  variables: serverVariables,
  settings: (values: Environment) => ({
    env: values.NODE_ENV,
    host: values.HOST,
    port: values.PORT,
    publicUrl: publicUrlOf(values),
    trustProxy: values.TRUST_PROXY,
    /** In milliseconds: the time a caller has to send a whole request (0: no bound). */
    requestTimeoutMs: values.HTTP_REQUEST_TIMEOUT_SECONDS * 1000,
    requestMaxJsonDepth: values.REQUEST_MAX_JSON_DEPTH,
    shutdownTimeoutMs: values.PLINTH_SHUTDOWN_TIMEOUT_MS,
    processRoles: values.PLINTH_PROCESS_ROLES,
    projectName: values.PLINTH_PROJECT_NAME,
  }),
} satisfies Area;
