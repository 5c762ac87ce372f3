import { Refusal } from '../../common/refusal';
import type { Config, NewsletterConfig } from '../../config';
import type { MailMessage, MailVariables } from '../../platform/mail/mailer';
import { publicUrl } from '../../platform/urls';
import type { Subscriber } from './newsletter.model';
import { confirmToken, unsubscribeToken } from './newsletter.tokens';

/** Why the newsletter cannot run (its secrets are unset in production), or undefined. */
export function newsletterConfigurationProblem(settings: NewsletterConfig): string | undefined {
  return settings.confirmSecret && settings.unsubscribeSecret
    ? undefined
    : 'the newsletter is not configured: NEWSLETTER_CONFIRM_SECRET and NEWSLETTER_UNSUBSCRIBE_SECRET must be set';
}

/** What every newsletter mail shares, whatever its flow: the signed links, the sender, the list headers. */
export class ListMail {
  private readonly settings: NewsletterConfig;

  constructor(private readonly deps: { config: Config }) {
    this.settings = deps.config.newsletter;
  }

  /** The two secrets; NOT_CONFIGURED when they are unset. */
  secrets(): { confirm: string; unsubscribe: string } {
    const problem = newsletterConfigurationProblem(this.settings);
    if (problem) throw new Refusal('NOT_CONFIGURED', problem, 503);
    return { confirm: this.settings.confirmSecret!, unsubscribe: this.settings.unsubscribeSecret! };
  }

  confirmUrl(email: string, expiresAt: Date): string {
    return publicUrl(this.deps.config, '/newsletter/confirm', { token: confirmToken(this.secrets().confirm, email, expiresAt), email });
  }

  unsubscribeUrl(email: string): string {
    return publicUrl(this.deps.config, '/newsletter/unsubscribe', { email, token: unsubscribeToken(this.secrets().unsubscribe, email) });
  }

  /** What every newsletter mail carries: the unsubscribe link (footer and RFC 8058 headers), sender, list. */
  message(subscriber: Pick<Subscriber, 'email' | 'name'>, template: string, variables: MailVariables, idempotencyKey: string): MailMessage {
    const unsubscribe = this.unsubscribeUrl(subscriber.email);
    const { listId, from } = this.settings;
    const host = new URL(this.deps.config.publicUrl).hostname;
    return {
      to: subscriber.email,
      template,
      from,
      variables: { name: subscriber.name ?? 'there', email: subscriber.email, unsubscribe_url: unsubscribe, ...variables },
      headers: {
        'List-Unsubscribe': `<${unsubscribe}>`,
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        ...(listId ? { 'List-Id': `<${listId}.${host}>` } : {}),
      },
      idempotencyKey,
      ...(listId ? { tags: { list: listId } } : {}),
    };
  }
}
