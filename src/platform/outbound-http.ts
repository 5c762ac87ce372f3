import type { IncomingHttpHeaders } from 'node:http';
import type { Agent } from 'undici';
import type { Config } from '../config';

/** Every way an outbound call fails, for callers to map (a retry, a 502, an envelope error). */
export type OutboundHttpErrorCode = 'TIMEOUT' | 'CONNECTION_REFUSED' | 'DNS' | 'TLS' | 'CONNECTION_RESET' | 'NETWORK' | 'TOO_LARGE' | 'INVALID_JSON';

/**
 * A failed outbound call. The message names the method and the origin only: paths, query
 * strings, headers and bodies may hold secrets (webhook URLs carry tokens in their paths).
 */
export class OutboundHttpError extends Error {
  constructor(
    readonly code: OutboundHttpErrorCode,
    message: string,
    /** The response's status, when the failure came after it (TOO_LARGE, INVALID_JSON). */
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'OutboundHttpError';
  }
}

export type OutboundHttpSettings = Config['outboundHttp'];

export interface OutboundRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** This call's limits instead of the settings'. */
  connectTimeoutMs?: number;
  /** The whole exchange: connecting, sending, and reading the response to its end. */
  timeoutMs?: number;
  maxResponseBytes?: number;
}

export interface OutboundJsonRequest extends Omit<OutboundRequest, 'body'> {
  /** Sent as the JSON body (and the method defaults to POST). */
  json?: unknown;
}

export interface OutboundResponse<Body = Buffer> {
  status: number;
  headers: IncomingHttpHeaders;
  body: Body;
}

export interface OutboundHttp {
  /**
   * One call to an absolute http(s) URL; a 3xx is answered as it is, never followed. Transport
   * failures and a response past the cap are OutboundHttpError; an invalid URL is a TypeError.
   */
  request(url: string | URL, options?: OutboundRequest): Promise<OutboundResponse>;
  /** A call with a JSON body (when `json` is given) whose answer is parsed as JSON; an empty answer is null. */
  requestJson<T = unknown>(url: string | URL, options?: OutboundJsonRequest): Promise<OutboundResponse<T | null>>;
  /** Closes the pooled connections once their calls finish. */
  close(): Promise<void>;
}

const TIMED_OUT = Symbol('outbound call timed out');
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME']);
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'ECONNABORTED']);
/** Node's TLS errors and OpenSSL's certificate verification codes. */
const TLS_CODE = /^ERR_TLS_|^ERR_SSL_|^EPROTO$|CERT|CRL|^UNABLE_TO_|^INVALID_(CA|PURPOSE)$|^PATH_LENGTH_EXCEEDED$|^HOSTNAME_MISMATCH$/;

const DESCRIPTIONS: Record<OutboundHttpErrorCode, string> = {
  TIMEOUT: 'timed out',
  CONNECTION_REFUSED: 'connection refused',
  DNS: 'host name not resolved',
  TLS: 'TLS handshake or certificate failed',
  CONNECTION_RESET: 'connection closed by the other side',
  NETWORK: 'network error',
  TOO_LARGE: 'response larger than the limit',
  INVALID_JSON: 'response is not valid JSON',
};

/** What an error says: the method, the origin and what went wrong; never a path or query string. */
const describe = (method: string, target: URL, code: OutboundHttpErrorCode) => `${method} ${target.origin}: ${DESCRIPTIONS[code]}`;

/** The code of a transport failure, from the error or any error in its cause chain. */
function codeOf(error: unknown): OutboundHttpErrorCode {
  // Not `instanceof Error`: Node's own errors may come from another realm (jest's sandbox, a worker).
  let current = error as { code?: unknown; cause?: unknown } | null | undefined;
  for (let depth = 0; typeof current === 'object' && current !== null && depth < 5; depth += 1, current = current.cause as typeof current) {
    const code = current.code;
    if (typeof code !== 'string') continue;
    if (TIMEOUT_CODES.has(code)) return 'TIMEOUT';
    if (code === 'ECONNREFUSED') return 'CONNECTION_REFUSED';
    if (DNS_CODES.has(code)) return 'DNS';
    if (TLS_CODE.test(code)) return 'TLS';
    if (RESET_CODES.has(code)) return 'CONNECTION_RESET';
  }
  return 'NETWORK';
}

/**
 * The outbound HTTP client (undici): a keep-alive pool per origin of at most
 * `maxConnectionsPerOrigin` connections, a connect timeout and a total timeout on every call,
 * a response size cap enforced while reading (the connection is dropped past it), and no
 * redirects followed. It logs nothing, so no header or body of a call reaches a log.
 */
export function createOutboundHttp(settings: OutboundHttpSettings): OutboundHttp {
  // undici (megabytes of heap) is required by the first call, not at start: many servers make none.
  const undici = () => require('undici') as typeof import('undici');
  // One pool set per connect timeout: undici fixes that timeout per dispatcher.
  const agents = new Map<number, Agent>();
  const agentFor = (connectTimeoutMs: number) => {
    let agent = agents.get(connectTimeoutMs);
    if (!agent) {
      // Our own timer bounds the whole call, so undici's per-phase timeouts are off.
      agent = new (undici().Agent)({
        connections: settings.maxConnectionsPerOrigin,
        connect: { timeout: connectTimeoutMs },
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      agents.set(connectTimeoutMs, agent);
    }
    return agent;
  };

  async function request(url: string | URL, options: OutboundRequest = {}): Promise<OutboundResponse> {
    const target = new URL(url);
    const method = (options.method ?? 'GET').toUpperCase();
    const timeoutMs = options.timeoutMs ?? settings.timeoutMs;
    const maxBytes = options.maxResponseBytes ?? settings.maxResponseBytes;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(TIMED_OUT), timeoutMs);
    let status: number | undefined;
    try {
      const response = await undici().request(target, {
        dispatcher: agentFor(options.connectTimeoutMs ?? settings.connectTimeoutMs),
        method,
        headers: options.headers,
        body: options.body,
        signal: abort.signal,
      });
      status = response.statusCode;
      const declared = Number(response.headers['content-length']);
      if (declared > maxBytes) {
        response.body.destroy();
        throw new OutboundHttpError('TOO_LARGE', `${describe(method, target, 'TOO_LARGE')} (${maxBytes} bytes)`, status);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxBytes) {
          // Destroying the unread body drops the connection: the rest is never read.
          response.body.destroy();
          throw new OutboundHttpError('TOO_LARGE', `${describe(method, target, 'TOO_LARGE')} (${maxBytes} bytes)`, status);
        }
        chunks.push(chunk);
      }
      return { status: response.statusCode, headers: response.headers, body: Buffer.concat(chunks, size) };
    } catch (error) {
      if (error instanceof OutboundHttpError) throw error;
      const code = abort.signal.reason === TIMED_OUT ? 'TIMEOUT' : codeOf(error);
      const detail = abort.signal.reason === TIMED_OUT ? ` after ${timeoutMs} ms` : '';
      throw new OutboundHttpError(code, `${describe(method, target, code)}${detail}`, status, { cause: error });
    } finally {
      clearTimeout(timer);
    }
  }

  async function requestJson<T>(url: string | URL, options: OutboundJsonRequest = {}): Promise<OutboundResponse<T | null>> {
    const { json, ...rest } = options;
    const sending = json !== undefined;
    const method = (rest.method ?? (sending ? 'POST' : 'GET')).toUpperCase();
    const response = await request(url, {
      ...rest,
      method,
      headers: { accept: 'application/json', ...(sending ? { 'content-type': 'application/json' } : {}), ...rest.headers },
      body: sending ? JSON.stringify(json) : undefined,
    });
    if (response.body.length === 0) return { ...response, body: null };
    try {
      return { ...response, body: JSON.parse(response.body.toString('utf8')) as T };
    } catch {
      // No cause: the parser's message quotes the body.
      throw new OutboundHttpError('INVALID_JSON', describe(method, new URL(url), 'INVALID_JSON'), response.status);
    }
  }

  return {
    request,
    requestJson,
    close: async () => {
      await Promise.all([...agents.values()].map((agent) => agent.close()));
      agents.clear();
    },
  };
}
