import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export const SMTP_USER = 'plinth-test';
export const SMTP_PASSWORD = 'smtp-password-9f8e7d6c';

/** The settings that send a test server's mail to the receiver on `port` (plain SMTP with the test login). */
export function smtpSettings(port: number): Record<string, string> {
  return { SMTP_HOST: '127.0.0.1', SMTP_PORT: String(port), SMTP_SECURE: 'none', SMTP_USER, SMTP_PASSWORD };
}

/** The next mail the receiver gets for `address`; mails to others before it are passed over. */
export async function nextMailTo(receiver: SmtpReceiver, address: string): Promise<ReceivedMail> {
  for (;;) {
    const mail = await receiver.next();
    if (mail.recipients.includes(address)) return mail;
  }
}

export interface ReceivedMail {
  /** RCPT TO of the SMTP dialogue. */
  recipients: string[];
  /** The user the client authenticated as. */
  user: string | undefined;
  parsed: ParsedMail;
  /** Date.now() when the message was received. */
  receivedAt: number;
}

export interface SmtpReceiver {
  port: number;
  received: ReceivedMail[];
  /** Resolves with the next mail that arrives (or the oldest not yet taken). */
  next(timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

export interface ReceiverOptions {
  port?: number;
  /** With a certificate: STARTTLS offered (`implicit` false) or TLS from the first byte. Without: no TLS at all. */
  tls?: { key: string; cert: string; implicit: boolean };
}

/**
 * A real SMTP server on loopback (smtp-server) that requires AUTH PLAIN/LOGIN with
 * SMTP_USER/SMTP_PASSWORD and parses what it receives with mailparser.
 */
export async function startSmtpReceiver({ port = 0, tls }: ReceiverOptions = {}): Promise<SmtpReceiver> {
  const received: ReceivedMail[] = [];
  const taken = { count: 0 };
  const waiting: (() => void)[] = [];
  const server = new SMTPServer({
    ...(tls ? { key: tls.key, cert: tls.cert, secure: tls.implicit } : { disabledCommands: ['STARTTLS'], allowInsecureAuth: true }),
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === SMTP_USER && auth.password === SMTP_PASSWORD) callback(null, { user: auth.username });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      // Plinth's mails carry their own text part; the text-to-HTML conversion (with its link
      // finding) is work no test reads, and half of the parsing's CPU.
      simpleParser(stream, { skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true })
        .then((parsed) => {
          received.push({
            recipients: session.envelope.rcptTo.map((to) => to.address),
            user: session.user as string | undefined,
            parsed,
            receivedAt: Date.now(),
          });
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
  // Errors of one connection (a client killed mid-dialogue, a refused TLS handshake) are that
  // client's to report; smtp-server reports them here only when someone listens.
  server.on('error', () => undefined);
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

/** A self-signed certificate for 127.0.0.1, made now with openssl; trust it with NODE_EXTRA_CA_CERTS=<certFile>. */
export function selfSignedCertificate(folder: string): { key: string; cert: string; certFile: string } {
  const keyFile = path.join(folder, 'smtp-key.pem');
  const certFile = path.join(folder, 'smtp-cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8'), certFile };
}
