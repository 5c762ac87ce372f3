import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export const SMTP_USER = 'plinth-test';
export const SMTP_PASSWORD = 'smtp-password-9f8e7d6c';

export interface ReceivedMail {
  /** RCPT TO of the SMTP dialogue. */
  recipients: string[];
  /** The user the client authenticated as. */
  user: string | undefined;
  parsed: ParsedMail;
}

export interface SmtpReceiver {
  port: number;
  received: ReceivedMail[];
  /** Resolves with the next mail that arrives (or the oldest not yet taken). */
  next(timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

/**
 * A real SMTP server on loopback (smtp-server) that requires AUTH PLAIN/LOGIN with
 * SMTP_USER/SMTP_PASSWORD, offers no STARTTLS, and parses what it receives with mailparser.
 */
export async function startSmtpReceiver(port = 0): Promise<SmtpReceiver> {
  const received: ReceivedMail[] = [];
  const taken = { count: 0 };
  const waiting: (() => void)[] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === SMTP_USER && auth.password === SMTP_PASSWORD) callback(null, { user: auth.username });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((parsed) => {
          received.push({ recipients: session.envelope.rcptTo.map((to) => to.address), user: session.user as string | undefined, parsed });
          waiting.splice(0).forEach((wake) => wake());
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.server.address() as AddressInfo).port,
    received,
    async next(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (received.length <= taken.count) {
        if (Date.now() > deadline) throw new Error(`no mail arrived within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 100);
          waiting.push(() => (clearTimeout(timer), resolve()));
        });
      }
      return received[taken.count++];
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
