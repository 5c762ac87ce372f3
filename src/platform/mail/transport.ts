import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Config, SmtpSettings } from '../../config';
import type { OutboundHttp } from '../outbound-http';
import type { RenderedMail } from './templates';

export interface SentMail {
  messageId: string;
  /** The .eml file, when the mail was written to one instead of sent. */
  file?: string;
}

/** A rendered mail and where it goes. */
export interface OutgoingMail extends RenderedMail {
  to: string;
  /** Default AUTH_EMAIL_FROM and AUTH_EMAIL_FROM_NAME. */
  from?: { address: string; name: string };
  /** Extra header fields (List-Unsubscribe, List-Id...): names and one-line values. */
  headers?: Record<string, string>;
  /**
   * Names this one mail, so that sending it again after a crash is recognisably the same mail:
   * it becomes the Message-ID over SMTP and the Idempotency-Key of the delivery API.
   */
  idempotencyKey?: string;
  /** Key/value labels the delivery API keeps with the mail (Resend's tags); SMTP ignores them. */
  tags?: Record<string, string>;
}

/** Where rendered mail goes: an SMTP server, an HTTP delivery API, or .eml files in development. */
export interface MailTransport {
  /** For messages: `smtp://host:port`, the API's origin, or the folder of the .eml files. */
  readonly destination: string;
  send(mail: OutgoingMail): Promise<SentMail>;
  close(): void;
}

/** A refusal of the delivery API; `responseCode` is its HTTP status (as nodemailer's is the SMTP code). */
export class MailApiError extends Error {
  override readonly name = 'MailApiError';
  constructor(
    message: string,
    readonly responseCode: number,
  ) {
    super(message);
  }
}

/** Why this configuration cannot deliver mail, or undefined when it can. */
export function mailDeliveryProblem(config: Pick<Config, 'env' | 'mail'>): string | undefined {
  return config.env === 'production' && !config.mail.smtp && !config.mail.api
    ? 'SMTP_HOST (or EMAIL_DELIVERY_API_KEY) is required when NODE_ENV=production'
    : undefined;
}

/** The domain of the sender's address, for Message-IDs. */
const senderDomain = (address: string) => address.slice(address.lastIndexOf('@') + 1);

/** nodemailer (megabytes of heap) is required when the first mail is sent, not at start. */
const nodemailer = () => require('nodemailer') as typeof import('nodemailer');

/** A header value: one line whatever it was given. */
const oneLine = (value: string) => value.replace(/[\r\n]+/g, ' ');

/**
 * EMAIL_DELIVERY_API_KEY set: the HTTP delivery API (httpMailTransport). Else SMTP_HOST set:
 * pooled SMTP connections. Neither, outside production: each mail is written as an .eml file
 * under `<PLINTH_DATA_DIR>/mail/` (open it in any mail program), so sign-up works on a fresh
 * machine. Neither in production: throws (mailDeliveryProblem).
 */
export function createMailTransport(config: Pick<Config, 'env' | 'mail' | 'database'>, http?: OutboundHttp): MailTransport {
  const problem = mailDeliveryProblem(config);
  if (problem) throw new Error(problem);
  const { smtp, from, api } = config.mail;
  if (api) {
    if (!http) throw new Error('the mail delivery API needs the outbound HTTP client');
    return httpMailTransport(api, from, http);
  }
  // The content is ours, never a path or URL for nodemailer to read.
  const message = (mail: OutgoingMail) => {
    const sender = mail.from ?? from;
    return {
      from: sender,
      to: mail.to,
      subject: mail.subject,
      html: mail.html,
      text: mail.text,
      headers: mail.headers && Object.fromEntries(Object.entries(mail.headers).map(([name, value]) => [name, oneLine(value)])),
      messageId: mail.idempotencyKey && `<${mail.idempotencyKey.replace(/[^A-Za-z0-9._-]/g, '.')}@${senderDomain(sender.address)}>`,
      // What nodemailer picks for our mostly-ASCII templates anyway; choosing it by scanning each
      // body would cost a large share of the CPU of building a mail.
      textEncoding: 'quoted-printable' as const,
      disableFileAccess: true,
      disableUrlAccess: true,
    };
  };

  if (smtp) {
    let pool: ReturnType<typeof createPool> | undefined;
    const createPool = () =>
      nodemailer().createTransport({
        pool: true,
        maxConnections: smtp.poolSize,
        host: smtp.host,
        port: smtp.port,
        secure: smtp.secure === 'tls',
        requireTLS: smtp.secure === 'starttls',
        ignoreTLS: smtp.secure === 'none',
        auth: smtp.user === undefined ? undefined : { user: smtp.user, pass: smtp.password },
        getSocket: (_options: unknown, callback: SocketCallback) => connectSmtpSocket(smtp, callback),
        connectionTimeout: smtp.connectionTimeoutMs,
        greetingTimeout: smtp.greetingTimeoutMs,
        socketTimeout: smtp.socketTimeoutMs,
        // nodemailer's own logging would print the SMTP dialogue: credentials and message bodies.
        logger: false,
        debug: false,
      });
    return {
      destination: `smtp://${smtp.host}:${smtp.port}`,
      async send(mail) {
        const info = await (pool ??= createPool()).sendMail(message(mail));
        return { messageId: info.messageId };
      },
      close: () => pool?.close(),
    };
  }

  const folder = path.join(config.database.dataDir, 'mail');
  let writer: ReturnType<typeof createWriter> | undefined;
  const createWriter = () => nodemailer().createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    destination: folder,
    async send(mail) {
      const info = await (writer ??= createWriter()).sendMail(message(mail));
      // Sign-in links are in there: readable by this user only.
      await fs.mkdir(folder, { recursive: true, mode: 0o700 });
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      const file = path.join(folder, `${stamp}-${mail.template}-${randomBytes(4).toString('hex')}.eml`);
      await fs.writeFile(file, info.message, { mode: 0o600 });
      return { messageId: info.messageId, file };
    },
    close: () => writer?.close(),
  };
}

/** What the delivery API answers: `{id}` on success, `{statusCode, name, message}` on a refusal (Resend's shapes). */
interface ApiAnswer {
  id?: unknown;
  name?: unknown;
  message?: unknown;
}

/**
 * Resend's documented API: `POST <EMAIL_DELIVERY_API_URL>/emails` with `Authorization: Bearer
 * <EMAIL_DELIVERY_API_KEY>` and `{from, to, subject, html, text, headers, tags}`, answered with
 * `{id}`. The mail's idempotency key goes in the `Idempotency-Key` header, so a retry after a
 * crash is not sent twice. Only the mail itself goes out: no contact or audience call.
 */
export function httpMailTransport(api: { url: string; key: string }, from: { address: string; name: string }, http: OutboundHttp): MailTransport {
  const endpoint = `${api.url}/emails`;
  const address = (sender: { address: string; name: string }) => `${sender.name.replace(/["\\\r\n]/g, '')} <${sender.address}>`;
  return {
    destination: new URL(api.url).origin,
    async send(mail) {
      const response = await http.requestJson<ApiAnswer>(endpoint, {
        headers: {
          authorization: `Bearer ${api.key}`,
          ...(mail.idempotencyKey ? { 'idempotency-key': mail.idempotencyKey.slice(0, 256) } : {}),
        },
        json: {
          from: address(mail.from ?? from),
          to: [mail.to],
          subject: mail.subject,
          html: mail.html,
          text: mail.text,
          ...(mail.headers ? { headers: Object.fromEntries(Object.entries(mail.headers).map(([name, value]) => [name, oneLine(value)])) } : {}),
          ...(mail.tags ? { tags: Object.entries(mail.tags).map(([name, value]) => ({ name, value })) } : {}),
        },
      });
      const answer = response.body ?? {};
      if (response.status >= 200 && response.status < 300 && typeof answer.id === 'string') return { messageId: answer.id };
      const reason = typeof answer.message === 'string' ? answer.message.slice(0, 300) : 'no reason given';
      const name = typeof answer.name === 'string' ? ` (${answer.name.slice(0, 64)})` : '';
      throw new MailApiError(`the mail delivery API answered ${response.status}${name}: ${reason}`, response.status);
    },
    close: () => undefined,
  };
}

type SocketCallback = (error: Error | null, socket?: { connection: net.Socket }) => void;

/**
 * nodemailer leaves Nagle's algorithm on, so the end of each message waits for the server's
 * delayed ACK (docs/decisions.md, "SMTP defaults"). So SMTP sockets are opened here, without
 * delay, within SMTP_CONNECTION_TIMEOUT_MS; nodemailer does the rest (TLS, STARTTLS, greeting, login).
 */
export function connectSmtpSocket(smtp: Pick<SmtpSettings, 'host' | 'port' | 'connectionTimeoutMs'>, callback: SocketCallback): void {
  const socket = net.connect({ host: smtp.host, port: smtp.port });
  socket.setNoDelay(true);
  socket.setKeepAlive(true);
  const onTimeout = () => socket.destroy(Object.assign(new Error('Connection timeout'), { code: 'ETIMEDOUT' }));
  const onError = (error: Error) => {
    socket.off('timeout', onTimeout);
    callback(error);
  };
  socket.setTimeout(smtp.connectionTimeoutMs);
  socket.on('timeout', onTimeout);
  socket.once('error', onError);
  socket.once('connect', () => {
    // From here on the socket is nodemailer's, with its own greeting and socket timeouts.
    socket.setTimeout(0);
    socket.off('timeout', onTimeout);
    socket.off('error', onError);
    callback(null, { connection: socket });
  });
}
