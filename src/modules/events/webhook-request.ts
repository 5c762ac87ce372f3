import { randomUUID } from 'node:crypto';
import { OutboundHttpError, type OutboundHttp } from '../../platform/outbound-http';
import type { HeaderConf, RetryConf } from './definitions';

/** What a template of a header value or webhook URL may name (spec 1 §2.5). */
export interface TemplateValues {
  sessionVariables: Record<string, string> | null;
  /** The id of this delivery attempt (also recorded in its invocation log). */
  requestId: string;
  adminSecret: string | undefined;
  env: NodeJS.ProcessEnv;
}

const TEMPLATE = /\{\{\s*(?:SESSION_VARIABLES\[\s*['"]([^'"\]]+)['"]\s*\]|([A-Za-z_][A-Za-z0-9_]*))\s*\}\}/g;

export class TemplateError extends Error {}

/**
 * Resolves `{{SESSION_VARIABLES['x-gql-user-id']}}`, `{{REQUEST_ID}}`, `{{ADMIN_SECRET}}` and
 * `{{ENV_VAR}}` (any other name is an environment variable: `{{API_KEY}}`, `{{API_TOKEN}}`...).
 * A name with no value is a TemplateError naming it (never its neighbours' values).
 */
export function resolveTemplate(text: string, values: TemplateValues): string {
  return text.replace(TEMPLATE, (_match, sessionVariable: string | undefined, name: string | undefined) => {
    if (sessionVariable !== undefined) {
      const value = values.sessionVariables?.[sessionVariable.toLowerCase()];
      if (value === undefined) throw new TemplateError(`the session variable ${sessionVariable} is not set for this event`);
      return value;
    }
    if (name === 'REQUEST_ID') return values.requestId;
    if (name === 'ADMIN_SECRET') {
      if (!values.adminSecret) throw new TemplateError('ADMIN_SECRET is not configured');
      return values.adminSecret;
    }
    const value = values.env[name!];
    if (value === undefined || value === '') throw new TemplateError(`the environment variable ${name} is not set`);
    return value;
  });
}

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: unknown;
  timeoutSec: number;
  /** Header values as the invocation log keeps them: resolved ones (from the environment or a template) redacted. */
  loggedHeaders: { name: string; value: string }[];
}

/** The request of one attempt: the webhook and headers resolved for it. */
export function webhookRequest(
  target: { webhook: string; headers: HeaderConf[]; retryConf: RetryConf },
  body: unknown,
  values: TemplateValues,
): WebhookRequest {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const loggedHeaders = [{ name: 'content-type', value: 'application/json' }];
  for (const header of target.headers) {
    const resolved = 'value' in header ? resolveTemplate(header.value, values) : values.env[header.value_from_env];
    if (resolved === undefined || resolved === '') {
      throw new TemplateError(`the environment variable ${'value_from_env' in header ? header.value_from_env : ''} (header ${header.name}) is not set`);
    }
    if (/[\r\n]/.test(resolved)) throw new TemplateError(`the header ${header.name} resolves to more than one line`);
    headers[header.name.toLowerCase()] = resolved;
    const literal = 'value' in header && resolved === header.value;
    loggedHeaders.push({ name: header.name, value: literal ? resolved : '[redacted]' });
  }
  return { url: resolveTemplate(target.webhook, values), headers, body, timeoutSec: target.retryConf.timeout_sec, loggedHeaders };
}

/** How an attempt ended. */
export interface AttemptResult {
  requestId: string;
  /** The HTTP status, or null when no response came (timeout, refused connection...). */
  status: number | null;
  /** The response body as text (cut at RESPONSE_LOG_LIMIT), or the transport error. */
  responseBody: string;
  responseHeaders: Record<string, string>;
  error: string | undefined;
  durationMs: number;
  /** delivered: done; final: refused for good (`{retry: false}`); retry: failed, may be retried. */
  outcome: 'delivered' | 'final' | 'retry';
  /** Retry-After of a failure, in seconds. */
  retryAfterSeconds: number | undefined;
}

/** The part of a response body kept in the invocation log. */
const RESPONSE_LOG_LIMIT = 64 * 1024;

/** `Retry-After`: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterSeconds(header: string | string[] | undefined, now = Date.now()): number | undefined {
  if (typeof header !== 'string' || header.trim() === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim());
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** Whether a response body says not to retry (spec 1 §6.3: `{status: 'error', retry: false}`). */
function refusesRetry(body: string): boolean {
  if (!body.includes('retry')) return false;
  try {
    const parsed: unknown = JSON.parse(body);
    return parsed !== null && typeof parsed === 'object' && (parsed as { retry?: unknown }).retry === false;
  } catch {
    return false;
  }
}

/** One POST to the webhook; never throws. */
export async function attemptDelivery(http: OutboundHttp, request: WebhookRequest | TemplateError, requestId: string): Promise<AttemptResult> {
  const started = performance.now();
  const base = { requestId, responseHeaders: {}, retryAfterSeconds: undefined };
  if (request instanceof TemplateError) {
    return { ...base, status: null, responseBody: '', error: request.message, durationMs: 0, outcome: 'retry' };
  }
  try {
    const response = await http.request(request.url, {
      method: 'POST',
      headers: request.headers,
      body: JSON.stringify(request.body),
      timeoutMs: request.timeoutSec * 1000,
    });
    const text = response.body.toString('utf8', 0, Math.min(response.body.length, RESPONSE_LOG_LIMIT));
    const success = response.status >= 200 && response.status < 300;
    const headers = Object.fromEntries(
      Object.entries(response.headers).flatMap(([name, value]) => (value === undefined ? [] : [[name, Array.isArray(value) ? value.join(', ') : value]])),
    );
    return {
      ...base,
      status: response.status,
      responseBody: text,
      responseHeaders: headers,
      error: undefined,
      durationMs: Math.round(performance.now() - started),
      outcome: refusesRetry(text) ? 'final' : success ? 'delivered' : 'retry',
      retryAfterSeconds: success ? undefined : retryAfterSeconds(response.headers['retry-after']),
    };
  } catch (error) {
    const message =
      error instanceof OutboundHttpError ? `${error.code}: ${error.message}` : error instanceof TypeError ? `invalid webhook URL` : 'delivery failed';
    return {
      ...base,
      status: error instanceof OutboundHttpError ? (error.status ?? null) : null,
      responseBody: '',
      error: message,
      durationMs: Math.round(performance.now() - started),
      outcome: 'retry',
    };
  }
}

/**
 * When the next attempt comes after a failed one (spec 1 §6.4): `interval_sec` after the first
 * attempt, then twice the previous wait each time; a Retry-After replaces it. `tries` counts the
 * attempts made so far, the failed one included. Undefined when the retries are used up.
 */
export function nextRetryDelaySeconds(retryConf: RetryConf, tries: number, retryAfter: number | undefined): number | undefined {
  if (tries > retryConf.num_retries) return undefined;
  return retryAfter ?? retryConf.interval_sec * 2 ** (tries - 1);
}

export const newRequestId = () => randomUUID();
