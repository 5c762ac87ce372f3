import { GraphQLError } from 'graphql';
import type { Logger } from 'pino';
import type { CustomService } from '../../config';
import { actionPath } from '../../http/actions';
import { ADMIN_SECRET_HEADER, CLIENT_ADDRESS_HEADER, type Session } from '../../platform/session';
import { OutboundHttpError, type OutboundHttp } from '../../platform/outbound-http';
import { resolveTemplate, type ActionEntry } from './actions.metadata';

/** What the engine sends a handler (Hasura's payload). */
export interface HandlerPayload {
  action: { name: string };
  input: Record<string, unknown>;
  session_variables: Record<string, string>;
  request_query: string;
}

/** One call of an action's handler. */
export interface HandlerCall {
  action: ActionEntry;
  input: Record<string, unknown>;
  session: Pick<Session, 'role' | 'userId' | 'variables'>;
  requestQuery: string;
  /** The client's headers; sent on when the action forwards them. */
  clientHeaders?: Record<string, string | string[] | undefined>;
  /** The client's address (TRUST_PROXY decides it); sent as X-Gql-Client-Address when the action forwards client headers. */
  clientAddress?: string;
}

/**
 * The error codes a GraphQL client sees when a handler call fails (docs/decisions.md, Actions).
 * A 4xx answer keeps its own `code` (Hasura's contract); these are for the rest.
 */
export const HANDLER_ERROR_CODES = {
  /** The handler answered 5xx, 3xx or 1xx. */
  failed: 'ACTION_HANDLER_ERROR',
  timeout: 'ACTION_HANDLER_TIMEOUT',
  /** Refused, reset, unknown host, TLS failure. */
  unreachable: 'ACTION_HANDLER_UNREACHABLE',
  /** A body that is not JSON, or too large. */
  invalidResponse: 'ACTION_HANDLER_INVALID_RESPONSE',
  /** A 2xx answer that does not fit the output type (Hasura's code). */
  unexpected: 'unexpected',
} as const;

/** Default codes of a 4xx answer that names none (spec 1 §7: the client must tell them apart). */
const STATUS_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  422: 'BAD_REQUEST',
  429: 'RATE_LIMITED',
};

/** Client headers never forwarded: hop-by-hop ones, the body's own, and credentials (the handler gets the session instead). */
const NOT_FORWARDED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'accept-encoding',
  'expect',
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
]);

export interface ActionCallSettings {
  adminSecret: string;
  /** Seconds, when the action sets no timeout (ACTIONS_HANDLER_TIMEOUT_SECONDS). */
  defaultTimeoutSeconds: number;
  customServices: readonly CustomService[];
  env: Record<string, string | undefined>;
}

/**
 * Calls action handlers as Hasura does: POST of the payload with the session headers, the
 * action's configured headers and (when asked) the client's, through the platform's outbound
 * client. Answers are mapped to what the GraphQL client is told.
 */
export class ActionCalls {
  constructor(
    private readonly http: OutboundHttp,
    private readonly settings: ActionCallSettings,
    private readonly logger: Logger,
  ) {}

  /** The URL a handler is called at: templates resolved, a declared service's host replaced by its override. */
  handlerUrl(handler: string): URL {
    return this.target(handler).url;
  }

  /** The URL a handler is called at, and the CS_<N> service it is the handler URL of (if any). */
  target(handler: string): { url: URL; service: CustomService | undefined } {
    const url = new URL(resolveTemplate(handler, this.settings.env));
    const service = this.serviceAt(url);
    if (service?.host) url.hostname = service.host;
    return { url, service };
  }

  /**
   * The declared service whose handler URL `url` is (spec 1 §2.1: `http://<name>:<port>...`): the
   * same scheme, host name and port, and no userinfo. Anything else, however alike, is another
   * server and gets no admin secret (docs/decisions.md, the admin-secret rule).
   */
  serviceAt(url: URL): CustomService | undefined {
    if (url.protocol !== 'http:' || url.username !== '' || url.password !== '') return undefined;
    const port = Number(url.port || 80);
    return this.settings.customServices.find((candidate) => candidate.name === url.hostname && candidate.port === port);
  }

  /** The client headers an action that forwards them sends on: not hop-by-hop ones, not credentials, not x-gql-*. */
  forwardable(clientHeaders: Record<string, string | string[] | undefined> | undefined): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(clientHeaders ?? {})) {
      const lower = name.toLowerCase();
      // x-gql-* are the engine's to send: a client may not assert a role or a user to the handler.
      if (value === undefined || NOT_FORWARDED.has(lower) || lower.startsWith('x-gql-')) continue;
      headers[lower] = Array.isArray(value) ? value.join(', ') : value;
    }
    return headers;
  }

  /**
   * The headers of a call: the forwarded and configured ones, then the engine's. The admin secret
   * goes to a declared service (`toService`), and to any other handler only as a configured header
   * (`{{ADMIN_SECRET}}`): a third-party handler, or a proxy on the way, must not obtain admin.
   */
  headers(call: HandlerCall, toService = false): Record<string, string> {
    const headers = call.action.definition.forward_client_headers ? this.forwardable(call.clientHeaders) : {};
    for (const header of call.action.definition.headers ?? []) {
      if ('value' in header) headers[header.name.toLowerCase()] = resolveTemplate(header.value, this.settings.env, this.settings.adminSecret);
      else {
        const value = this.settings.env[header.value_from_env];
        if (value === undefined) throw new Error(`the environment variable ${header.value_from_env} is not set`);
        headers[header.name.toLowerCase()] = value;
      }
    }
    headers['content-type'] = 'application/json';
    if (toService) headers[ADMIN_SECRET_HEADER] = this.settings.adminSecret;
    headers['x-gql-role'] = call.session.role;
    if (call.session.userId) headers['x-gql-user-id'] = call.session.userId;
    else delete headers['x-gql-user-id'];
    // The handler's limits then count the end user, not this engine (a handler believes it from the admin secret's holder only).
    if (call.action.definition.forward_client_headers && call.clientAddress) headers[CLIENT_ADDRESS_HEADER] = call.clientAddress;
    else delete headers[CLIENT_ADDRESS_HEADER];
    headers['x-gql-session-variables'] = JSON.stringify(call.session.variables);
    return headers;
  }

  payload(call: HandlerCall): HandlerPayload {
    return {
      action: { name: call.action.name },
      input: call.input,
      session_variables: call.session.variables,
      request_query: call.requestQuery,
    };
  }

  /** Calls the handler; resolves with its parsed 2xx answer or throws the GraphQLError the client gets. */
  async call(call: HandlerCall): Promise<unknown> {
    const { action } = call;
    const timeoutSeconds = action.definition.timeout ?? this.settings.defaultTimeoutSeconds;
    let url: URL;
    let headers: Record<string, string>;
    try {
      const target = this.target(action.definition.handler);
      url = target.url;
      headers = this.headers(call, target.service !== undefined);
    } catch (error) {
      // A template whose variable was unset after the action was declared.
      this.logger.error({ action: action.name, reason: (error as Error).message }, 'action handler cannot be called');
      throw handlerError('the action handler is not configured correctly', HANDLER_ERROR_CODES.unreachable);
    }
    let status: number;
    let body: Buffer;
    try {
      ({ status, body } = await this.http.request(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(this.payload(call)),
        timeoutMs: timeoutSeconds * 1000,
      }));
    } catch (error) {
      if (!(error instanceof OutboundHttpError)) throw error;
      this.logger.warn({ action: action.name, code: error.code, reason: error.message }, 'action handler call failed');
      if (error.code === 'TIMEOUT') throw handlerError(`the action handler did not answer within ${timeoutSeconds} s`, HANDLER_ERROR_CODES.timeout);
      if (error.code === 'TOO_LARGE') throw handlerError("the action handler's answer is too large", HANDLER_ERROR_CODES.invalidResponse);
      throw handlerError('the action handler could not be reached', HANDLER_ERROR_CODES.unreachable);
    }
    return this.answer(action.name, status, body);
  }

  /** Maps a handler's answer: 2xx is the result, 4xx the handler's error, anything else a failure without detail. */
  answer(actionName: string, status: number, body: Buffer): unknown {
    let parsed: unknown;
    let json = true;
    try {
      parsed = body.length === 0 ? null : JSON.parse(body.toString('utf8'));
    } catch {
      json = false;
    }
    if (status >= 200 && status < 300) {
      if (!json) {
        this.logger.warn({ action: actionName, status }, 'action handler answered with a body that is not JSON');
        throw handlerError('the action handler answered with a body that is not JSON', HANDLER_ERROR_CODES.invalidResponse);
      }
      return parsed;
    }
    if (status >= 400 && status < 500) {
      const error = json && parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
      const given =
        error.extensions !== null && typeof error.extensions === 'object' && !Array.isArray(error.extensions)
          ? (error.extensions as Record<string, unknown>)
          : {};
      // Hasura's `{message, extensions: {code}}`, its older top-level `code`, and spec 1 §2.3's `error_code`.
      const code = [given.code, error.code, error.error_code].find((value) => typeof value === 'string' && value !== '') as string | undefined;
      const message = [error.message, error.error].find((value) => typeof value === 'string' && value !== '') as string | undefined;
      const extensions: Record<string, unknown> = { ...given };
      if (Array.isArray(error.errors) && given.errors === undefined) extensions.errors = error.errors;
      extensions.code = code ?? STATUS_CODES[status] ?? 'BAD_REQUEST';
      extensions.status = status;
      throw new GraphQLError(message ?? `the action handler refused the request (HTTP ${status})`, { extensions });
    }
    this.logger.warn({ action: actionName, status }, 'action handler failed');
    throw handlerError(`the action handler failed (HTTP ${status})`, HANDLER_ERROR_CODES.failed, { status });
  }
}

export function handlerError(message: string, code: string, extensions: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, { extensions: { ...extensions, code } });
}

/** The handler URL of an action routed to a declared service: `http://<name>:<port><route>/<kebab-action>` (spec 1 §2.1). */
export function serviceHandlerUrl(service: CustomService, actionName: string): string {
  return `http://${service.name}:${service.port}${service.route === '/' ? '' : service.route}/${actionPath(actionName)}`;
}
