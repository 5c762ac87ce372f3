import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { OutboundHttpError, type OutboundHttp } from '../../platform/outbound-http';

export interface BreachCheckSettings {
  enabled: boolean;
  /** AUTH_PASSWORD_HIBP_API_URL: the k-anonymity range API (Have I Been Pwned's, or one speaking it). */
  apiUrl: string;
  timeoutMs: number;
}

/**
 * AUTH_PASSWORD_HIBP_ENABLED: refuses passwords found in breaches, through the range API: only
 * the first 5 hex digits of the password's SHA-1 leave the server, and the answer lists the
 * suffixes of every breached hash under that prefix (padded, so its size tells nothing either).
 * When the service cannot be reached the password is accepted and the failure logged: an outage
 * of a third party must not stop sign-up (docs/decisions.md).
 */
export class BreachedPasswords {
  constructor(
    private readonly http: OutboundHttp,
    private readonly settings: BreachCheckSettings,
    private readonly logger: Logger,
  ) {}

  async isBreached(password: string): Promise<boolean> {
    if (!this.settings.enabled) return false;
    const digest = createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase();
    const prefix = digest.slice(0, 5);
    const suffix = digest.slice(5);
    try {
      const response = await this.http.request(`${this.settings.apiUrl}/range/${prefix}`, {
        headers: { 'add-padding': 'true', 'user-agent': 'plinth-auth' },
        timeoutMs: this.settings.timeoutMs,
      });
      if (response.status !== 200) {
        this.logger.warn({ status: response.status }, 'breached-password check answered an error; password accepted');
        return false;
      }
      for (const line of response.body.toString('utf8').split(/\r?\n/)) {
        const [candidate, count] = line.trim().split(':');
        // Padding entries carry a count of 0.
        if (candidate?.toUpperCase() === suffix && Number(count) > 0) return true;
      }
      return false;
    } catch (error) {
      if (!(error instanceof OutboundHttpError)) throw error;
      this.logger.warn({ code: error.code, reason: error.message }, 'breached-password check failed; password accepted');
      return false;
    }
  }
}
