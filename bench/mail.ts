import { fork } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import nodemailer from 'nodemailer';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/config';
import { createMailDelivery, type MailMessage } from '../src/platform/mail/mailer';
import { connectSmtpSocket } from '../src/platform/mail/transport';
import { positiveInteger } from './settings';
import { STORAGE_URL_SIGNING_SECRET } from './shared';
import { median } from './statistics';

/**
 * Mail throughput: Plinth's delivery step (the `mail` worker's work: template render — a cached
 * compiled template filled in, HTML escaping — then nodemailer over pooled SMTP connections)
 * against (a) nodemailer on the same pool and the same sockets sending the same mail already
 * rendered: the ratio is the cost of our layer; and (b) stock nodemailer (its own sockets, Nagle
 * on), pre-rendered: what our sockets change (transport.ts). The queue (pg-boss) is in none.
 * Besides mails per second, the CPU time of this process per mail (the receiver's is not counted).
 *
 *   npm run bench:mail
 *   BENCH_MAILS=5000 BENCH_CONCURRENCY=20 BENCH_ROUNDS=5 npm run bench:mail
 *
 * Environment: BENCH_MAILS (per run, 2000), BENCH_CONCURRENCY (sends in flight, 10),
 * BENCH_ROUNDS (3; rounds alternate the two and the medians are reported), BENCH_POOL_SIZE
 * (SMTP_POOL_SIZE of both, 5). The SMTP receiver (smtp-server, no auth, no TLS, discards what it
 * reads) runs in a child process, so it never shares the senders' event loop.
 */

const MESSAGE: MailMessage = {
  to: 'ada@example.com',
  template: 'verify-email',
  variables: {
    display_name: 'Ada Lovelace',
    email: 'ada@example.com',
    link: 'http://localhost:8080/auth/verify?ticket=otp:5a0c3a8e-4b5e-4b8e-9d3e-1f0b6a7c2d19&type=emailVerify&redirectTo=http%3A%2F%2Flocalhost%3A3000%2F',
  },
};

/** The child: an SMTP server that accepts everything and reports its port. */
function runReceiver(): void {
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, _session, callback) {
      stream.on('data', () => undefined);
      stream.on('end', () => callback());
    },
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.server.address() as AddressInfo).port }));
  process.on('disconnect', () => server.close(() => process.exit(0)));
}

function startReceiver(): Promise<{ port: number; stop(): void }> {
  const child = fork(__filename, ['receiver'], { stdio: 'inherit' });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the SMTP receiver exited (code ${code})`)));
    child.once('message', (message: { port: number }) => resolve({ port: message.port, stop: () => child.disconnect() }));
  });
}

interface Run {
  mailsPerSecond: number;
  cpuMicrosPerMail: number;
}

/** Runs `count` sends, `concurrency` at a time. */
async function measure(count: number, concurrency: number, send: () => Promise<unknown>): Promise<Run> {
  let started = 0;
  const start = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < count) {
        started++;
        await send();
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return { mailsPerSecond: count / (Number(process.hrtime.bigint() - start) / 1e9), cpuMicrosPerMail: (used.user + used.system) / count };
}

async function runBenchmark(): Promise<void> {
  const mails = positiveInteger('BENCH_MAILS', 2000);
  const concurrency = positiveInteger('BENCH_CONCURRENCY', 10);
  const rounds = positiveInteger('BENCH_ROUNDS', 3);
  const poolSize = positiveInteger('BENCH_POOL_SIZE', 5);
  const receiver = await startReceiver();

  const config = loadConfig({
    NODE_ENV: 'production',
    GQL_GRAPHQL_ADMIN_SECRET: 'bench-admin-secret-0123456789abcdef',
    GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'bench-jwt-signing-key-of-at-least-32-bytes!' }),
    STORAGE_URL_SIGNING_SECRET,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(receiver.port),
    SMTP_SECURE: 'none',
    SMTP_POOL_SIZE: String(poolSize),
  });
  // At warn, as the GraphQL benchmark runs the server: the per-mail info line is not measured.
  const plinth = createMailDelivery(config, pino({ level: 'warn' }));
  const rendered = await plinth.render(MESSAGE);
  const smtp = config.mail.smtp!;
  const pool = { pool: true, maxConnections: poolSize, host: smtp.host, port: smtp.port, ignoreTLS: true } as const;
  const sameSockets = nodemailer.createTransport({
    ...pool,
    getSocket: (_options: unknown, callback: Parameters<typeof connectSmtpSocket>[1]) => connectSmtpSocket(smtp, callback),
  });
  const stock = nodemailer.createTransport(pool);
  // A new string per mail, as every real mail has: V8 caches regular-expression results per
  // subject string, which would flatter a baseline sending one string object again and again.
  const fresh = (text: string) => ` ${text}`.slice(1);
  const prerendered = () => ({ from: config.mail.from, to: MESSAGE.to, subject: rendered.subject, html: fresh(rendered.html), text: fresh(rendered.text) });
  const targets = [
    { label: 'Plinth delivery (render + pooled SMTP)', send: () => plinth.deliver(MESSAGE) },
    { label: '(a) nodemailer, same sockets, pre-rendered', send: () => sameSockets.sendMail(prerendered()) },
    { label: '(b) stock nodemailer (Nagle on), pre-rendered', send: () => stock.sendMail(prerendered()) },
  ];

  try {
    console.log(
      `mail benchmark: ${mails} mails x ${rounds} rounds, ${concurrency} in flight, ${poolSize} pooled SMTP connections, node ${process.version}, ${os.cpus().length} CPUs`,
    );
    console.log(`message: template ${MESSAGE.template}, ${Buffer.byteLength(rendered.html)} bytes of HTML, ${Buffer.byteLength(rendered.text)} of text\n`);
    // Warm-up: connections opened, code optimised.
    for (const target of targets) await measure(Math.min(mails, 500), concurrency, target.send);

    const runs: Run[][] = targets.map(() => []);
    for (let round = 0; round < rounds; round++) {
      for (const [index, target] of targets.entries()) runs[index].push(await measure(mails, concurrency, target.send));
    }

    const rates = runs.map((list) => median(list.map((run) => run.mailsPerSecond)));
    for (const [index, target] of targets.entries()) {
      const perRound = runs[index].map((run) => run.mailsPerSecond.toFixed(0)).join(', ');
      const cpu = median(runs[index].map((run) => run.cpuMicrosPerMail));
      console.log(
        `${target.label.padEnd(48)} ${rates[index].toFixed(0).padStart(6)} mails/s  ${cpu.toFixed(0).padStart(5)} µs CPU/mail  (rounds: ${perRound})`,
      );
    }
    console.log(`\nratio Plinth / (a): ${(rates[0] / rates[1]).toFixed(2)}   (the cost of rendering and our layer)`);
    console.log(`ratio Plinth / (b): ${(rates[0] / rates[2]).toFixed(2)}   (against stock nodemailer)`);
  } finally {
    plinth.close();
    sameSockets.close();
    stock.close();
    receiver.stop();
  }
}

(process.argv[2] === 'receiver' ? Promise.resolve(runReceiver()) : runBenchmark()).catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
