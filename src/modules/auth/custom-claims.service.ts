import type { Logger } from 'pino';
import type { OutboundHttp } from '../../platform/outbound-http';
import { OutboundHttpError } from '../../platform/outbound-http';
import type { UserRow } from './auth-user';

/** Claims a hook may not set: the ones that say who the user is and what it may do. */
const PROTECTED_CLAIMS = new Set(['x-gql-allowed-roles', 'x-gql-default-role', 'x-gql-user-id']);
const CLAIM_NAME = /^x-gql-[a-z0-9][a-z0-9-]{0,62}$/;

export type ClaimValue = string | number | boolean | string[] | null;

/**
 * AUTH_CUSTOM_CLAIMS_WEBHOOK: each access token's extra claims come from a POST of
 * `{userId, claims}` (the user's standard claims) that answers `{"x-gql-<name>": value, ...}`.
 * When the hook fails (down, slow, not 2xx, not a JSON object) the defaults of spec 2 §2.2 apply
 * and the failure is logged: a broken hook must not stop sign-in.
 */
export class CustomClaims {
  constructor(
    private readonly http: OutboundHttp,
    private readonly hook: { url: string; timeoutMs: number } | undefined,
    private readonly logger: Logger,
  ) {}

  async claimsFor(user: UserRow, standard: Record<string, ClaimValue>): Promise<Record<string, ClaimValue>> {
    if (!this.hook) return {};
    const defaults: Record<string, ClaimValue> = {
      'x-gql-source-account-id': user.source_account_id,
      'x-gql-tenant-id': null,
      'x-gql-plan': 'free',
    };
    let answer: unknown;
    try {
      const response = await this.http.requestJson(this.hook.url, {
        json: { userId: user.id, claims: standard },
        timeoutMs: this.hook.timeoutMs,
        connectTimeoutMs: this.hook.timeoutMs,
      });
      if (response.status < 200 || response.status > 299) {
        this.logger.warn({ status: response.status }, 'custom claims hook answered an error; default claims used');
        return defaults;
      }
      answer = response.body;
    } catch (error) {
      if (!(error instanceof OutboundHttpError)) throw error;
      this.logger.warn({ code: error.code, reason: error.message }, 'custom claims hook failed; default claims used');
      return defaults;
    }
    if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) {
      this.logger.warn('custom claims hook did not answer a JSON object; default claims used');
      return defaults;
    }
    const claims = { ...defaults };
    for (const [name, value] of Object.entries(answer)) {
      const key = name.toLowerCase();
      if (!CLAIM_NAME.test(key) || PROTECTED_CLAIMS.has(key) || !isClaimValue(value)) continue;
      claims[key] = value;
    }
    return claims;
  }
}

function isClaimValue(value: unknown): value is ClaimValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}
