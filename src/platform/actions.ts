import type { IncomingHttpHeaders } from 'node:http';
import type { QuotaName } from './quotas';
import type { RateLimitName } from './rate-limits';
import type { Session } from './session';

/** An engine-compatible action handler a module declares (its `actions`); the http layer serves it. */
export interface ActionDefinition {
  /** The GraphQL name of the action, as the engine sends it in `action.name`. */
  name: string;
  /** Roles that may call it, the same list its resolver declares with @Authorized. */
  roles: readonly string[];
  /** JSON schema of the action's arguments (the envelope's `input`). */
  argumentsSchema: Record<string, unknown>;
  /** Named limits the route applies once the session is known, besides actionHandlers (rateLimitCaller says who counts). */
  rateLimits?: RateLimitName[];
  /** A quota (platform/quotas.ts) the route applies once the session is known, after the rate limits. */
  quota?: QuotaName;
  /** The request carries a file: its body may be as large as the upload body limit. */
  carriesUpload?: boolean;
  /**
   * Calls the service; its answer (with `success`) is the response envelope. `headers` are the
   * handler request's (the engine forwards client headers such as Idempotency-Key when told to).
   */
  handle(argumentsValue: Record<string, unknown>, session: Session, headers: IncomingHttpHeaders): Promise<{ success: boolean }>;
}
