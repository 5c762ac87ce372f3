import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import pino, { type Logger } from 'pino';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { createQueryLimits, type QueryLimitSettings } from '../../src/graphql/limits';
import { attachSubscriptions } from '../../src/graphql/subscriptions';
import { RateLimits } from '../../src/platform/rate-limits';
import { ADMIN_SECRET, CLAIMS_NAMESPACE, compiledExecutionEnabled, JWT_KEY } from './server';

/** A graphql-ws server alone (no Plinth around it) on `schema`, listening on a random loopback port. */
export async function startSubscriptionServer(
  schema: GraphQLSchema,
  options: { limits: QueryLimitSettings; multiplexing?: boolean; logger?: Logger },
): Promise<{ server: http.Server; subscriptions: ReturnType<typeof attachSubscriptions>; url: string }> {
  const server = http.createServer();
  const subscriptions = attachSubscriptions(
    server,
    schema,
    {
      adminSecret: ADMIN_SECRET,
      jwtSecret: { type: 'HS256', key: JWT_KEY, claims_namespace: CLAIMS_NAMESPACE, claims_format: 'json', allowed_skew: 0 },
      unauthorizedRole: 'anonymous',
      initTimeoutMs: 3000,
      limits: loadConfig({}).graphql.wsLimits,
      maxPayload: 1024 * 1024,
      multiplexing: options.multiplexing ?? true,
      compiledExecution: { enabled: compiledExecutionEnabled(), cacheBytes: 4 * 1024 * 1024 },
    },
    createQueryLimits(schema, options.limits),
    options.logger ?? pino({ level: 'silent' }),
    {
      clientIp: (request) => request.socket.remoteAddress ?? '',
      rateLimits: new RateLimits({ kind: 'memory' }, { registration: { points: 1, durationSeconds: 60, key: 'ip' } }, pino({ level: 'silent' })),
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, subscriptions, url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/graphql/subscriptions` };
}

/** A graphql-ws client (graphql-transport-ws) that does not retry, so failures show. */
export function subscriptionClient(url: string, connectionParams: Record<string, unknown> = {}): Client {
  return createClient({ url, webSocketImpl: WebSocket, connectionParams, retryAttempts: 0, lazy: true });
}

export interface Subscription<TData> {
  /** Resolves with the next result (data or errors) the server sends. */
  next(timeoutMs?: number): Promise<ExecutionResult<TData>>;
  /** Resolves once the server acknowledged the connection and the subscription is live. */
  ready: Promise<void>;
  dispose(): void;
}

export function subscribe<TData, TVariables extends Record<string, unknown> = Record<string, never>>(
  client: Client,
  document: TypedDocumentNode<TData, TVariables>,
  variables?: TVariables,
): Subscription<TData> {
  const received: ExecutionResult<TData>[] = [];
  const waiting: ((result: ExecutionResult<TData>) => void)[] = [];
  let failure: unknown;
  const ready = new Promise<void>((resolve, reject) => {
    const offConnected = client.on('connected', () => {
      offConnected();
      // The subscribe message follows the ack on the same socket; give the server a moment to register it.
      setTimeout(resolve, 150);
    });
    client.on('closed', (event) => reject(event));
  });
  ready.catch(() => undefined);
  const dispose = client.subscribe<TData>(
    { query: print(document), ...(variables ? { variables } : {}) },
    {
      next: (result) => {
        const resolve = waiting.shift();
        if (resolve) resolve(result as ExecutionResult<TData>);
        else received.push(result as ExecutionResult<TData>);
      },
      error: (error) => (failure = error),
      complete: () => undefined,
    },
  );
  return {
    ready,
    dispose,
    next(timeoutMs = 10_000) {
      const queued = received.shift();
      if (queued) return Promise.resolve(queued);
      if (failure) return Promise.reject(failure);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no subscription result within the time limit')), timeoutMs);
        waiting.push((result) => {
          clearTimeout(timer);
          resolve(result);
        });
      });
    },
  };
}

/**
 * Opens a raw graphql-transport-ws socket, sends `messages` once open (those after a
 * connection_init only once the server acknowledged it), and resolves with everything the
 * server sent and how it closed the socket.
 */
export function rawSocket(
  url: string,
  messages: unknown[],
  options: { closeAfterMs?: number; protocol?: string | null } = {},
): Promise<{ code: number; reason: string; received: unknown[] }> {
  return new Promise((resolve, reject) => {
    const protocol = options.protocol === undefined ? 'graphql-transport-ws' : options.protocol;
    const socket = protocol === null ? new WebSocket(url) : new WebSocket(url, protocol);
    const received: unknown[] = [];
    const timer = setTimeout(() => socket.close(1000, 'test done'), options.closeAfterMs ?? 5000);
    const initFirst = (messages[0] as { type?: string } | undefined)?.type === 'connection_init';
    const [first, ...rest] = messages;
    socket.on('open', () => {
      for (const message of initFirst ? [first] : messages) socket.send(JSON.stringify(message));
    });
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type?: string };
      received.push(message);
      if (initFirst && message.type === 'connection_ack') for (const next of rest) socket.send(JSON.stringify(next));
    });
    socket.on('close', (code, reason) => {
      clearTimeout(timer);
      resolve({ code, reason: String(reason), received });
    });
    socket.on('error', reject);
  });
}
