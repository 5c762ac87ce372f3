import type { Logger } from 'pino';
import { MAIL_ADDRESS } from '../../common/mail-address';
import { ConfigError, type Config } from '../../config';
import type { JobDefinition, JobSender, SendOptions } from '../jobs';
import type { OutboundHttp } from '../outbound-http';
import { MailError, MailTemplates, type MailVariables, type RenderedMail } from './templates';
import { createMailTransport, mailDeliveryProblem, type MailTransport, type OutgoingMail, type SentMail } from './transport';

export { MailError, type MailVariables } from './templates';
export type { SentMail } from './transport';

/** The queue every mail goes through. */
export const MAIL_QUEUE = 'mail';

/** One mail: a template and its variables, to one recipient. Also the `mail` job's data. */
export interface MailMessage {
  to: string;
  /** `<name>.mjml`/`.html` in AUTH_EMAIL_TEMPLATES_DIR, else the built-in `<name>`. */
  template: string;
  /** Values of the template's placeholders; auth_url, public_url and sender_name are given. */
  variables?: MailVariables;
  /** The sender, when not AUTH_EMAIL_FROM (the newsletter's EMAIL_DELIVERY_FROM). */
  from?: OutgoingMail['from'];
  /** Extra header fields, e.g. List-Unsubscribe and List-Unsubscribe-Post (RFC 8058). */
  headers?: Record<string, string>;
  /** Names this one mail: the Message-ID over SMTP, the Idempotency-Key of the delivery API. */
  idempotencyKey?: string;
  /** Labels the delivery API keeps with the mail. */
  tags?: Record<string, string>;
}

/** What modules send mail with (`platform.mailer`). */
export interface Mailer {
  /**
   * Checks the message — address, template, every placeholder has a value — and queues it
   * (inside `transaction` when given); resolves with the job id. A bad message throws MailError
   * and queues nothing. The `mail` worker delivers it, retrying while the SMTP server is down.
   */
  send(message: MailMessage, options?: Pick<SendOptions, 'transaction'>): Promise<string>;
  /**
   * Renders and delivers at once, not through the `mail` queue: for a queue worker of its own
   * that records each outcome and decides each retry itself (the newsletter's sends). Throws
   * MailError for a bad message, the transport's error for a failed delivery.
   */
  deliver(message: MailMessage): Promise<SentMail>;
  /**
   * For a module that sends mail, at start-up: throws ConfigError when mail cannot be delivered
   * (NODE_ENV=production without SMTP_HOST), naming `feature`, so the server does not start.
   */
  requireDelivery(feature: string): void;
}

/** The templates with the variables every mail gets. */
export function mailTemplates(config: Config): MailTemplates {
  return new MailTemplates({
    overridesDir: config.mail.templatesDir,
    cacheSize: config.mail.templateCacheSize,
    defaults: { auth_url: config.auth.serverUrl, public_url: config.publicUrl, sender_name: config.mail.from.name },
  });
}

/**
 * Renders a message and hands it to the transport, at once: the `mail` worker's step, and what
 * `plinth mail send-test` and the benchmark call directly.
 */
export class MailDelivery {
  constructor(
    readonly templates: MailTemplates,
    private readonly transport: MailTransport,
    private readonly logger: Logger,
  ) {}

  get destination(): string {
    return this.transport.destination;
  }

  /** Throws MailError when the address is not one, or the template fails to render. */
  async render(message: MailMessage): Promise<RenderedMail> {
    if (!MAIL_ADDRESS.test(message.to)) throw new MailError(`"${message.to}" is not an e-mail address`);
    return this.templates.render(message.template, message.variables);
  }

  async deliver(message: MailMessage): Promise<SentMail> {
    const mail = await this.render(message);
    const { to, from, headers, idempotencyKey, tags } = message;
    const sent = await this.transport.send({ ...mail, to, from, headers, idempotencyKey, tags });
    // Recipient and subject only: a body holds sign-in links.
    const fields = { template: mail.template, to: message.to, subject: mail.subject, messageId: sent.messageId };
    if (sent.file) this.logger.info({ ...fields, file: sent.file }, 'mail written to a file (SMTP_HOST is unset)');
    else this.logger.info(fields, 'mail sent');
    return sent;
  }

  close(): void {
    this.transport.close();
  }
}

/** `http` is needed when EMAIL_DELIVERY_API_KEY sends mail through the delivery API. */
export function createMailDelivery(config: Config, logger: Logger, http?: OutboundHttp): MailDelivery {
  return new MailDelivery(mailTemplates(config), createMailTransport(config, http), logger);
}

export interface MailService {
  mailer: Mailer;
  /** The `mail` queue and its worker, for the jobs engine to register. */
  jobs: JobDefinition<MailMessage>[];
  /** Closes the SMTP connections. */
  close(): void;
}

/**
 * The mailer and its queue. Every mail goes through the `mail` queue, so one accepted by
 * `send` survives a crash and an SMTP outage (retried MAIL_RETRY_LIMIT times, from
 * MAIL_RETRY_DELAY_SECONDS doubling).
 */
export function createMailer({ config, logger, jobs, http }: { config: Config; logger: Logger; jobs: JobSender; http?: OutboundHttp }): MailService {
  const log = logger.child({ component: 'mail' });
  const problem = mailDeliveryProblem(config);
  const delivery = problem ? undefined : createMailDelivery(config, log, http);

  const mailer: Mailer = {
    async send(message, options = {}) {
      if (!delivery) throw new Error(`${problem}: mail cannot be sent`);
      await delivery.render(message);
      const { variables = {}, ...rest } = message;
      return jobs.send<MailMessage>(MAIL_QUEUE, { ...rest, variables }, { transaction: options.transaction });
    },
    async deliver(message) {
      if (!delivery) throw new Error(`${problem}: mail cannot be sent`);
      return delivery.deliver(message);
    },
    requireDelivery(feature) {
      if (problem) throw new ConfigError([`${problem} (${feature} sends mail)`]);
    },
  };

  const worker: JobDefinition<MailMessage> = {
    queue: MAIL_QUEUE,
    settings: { retryLimit: config.mail.retryLimit, retryDelaySeconds: config.mail.retryDelaySeconds, retryBackoff: true },
    async work(message, job) {
      if (!delivery) throw new Error(`${problem}: mail cannot be sent`);
      try {
        await delivery.deliver(message);
      } catch (error) {
        const { code, responseCode } = error as { code?: string; responseCode?: number };
        log.warn(
          { template: message.template, to: message.to, attempt: job.retryCount + 1, code, responseCode, reason: (error as Error).message },
          'mail not delivered; the queue retries it',
        );
        throw error;
      }
    },
  };

  return { mailer, jobs: [worker], close: () => delivery?.close() };
}
