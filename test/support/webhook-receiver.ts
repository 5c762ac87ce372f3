import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
  /** When it arrived (Date.now()). */
  at: number;
}

export interface Answer {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Waits this long before answering. */
  delayMs?: number;
}

/**
 * A webhook receiver on loopback for the tests: records every request and answers as `answer`
 * says (200 {status: "ok"} by default; per path, per call).
 */
export interface WebhookReceiver {
  url: string;
  received: ReceivedRequest[];
  /** Requests to `path`. */
  at(path: string): ReceivedRequest[];
  /** Sets how requests to `path` are answered (a function gets the request and its number at that path, from 1). */
  answer(path: string, answer: Answer | ((request: ReceivedRequest, count: number) => Answer)): void;
  /** Resolves once `path` received `count` requests, or rejects after `timeoutMs`. */
  waitFor(path: string, count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedRequest[] = [];
  const answers = new Map<string, Answer | ((request: ReceivedRequest, count: number) => Answer)>();
  const waiters = new Set<() => void>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Kept as text.
      }
      const path = request.url ?? '/';
      const entry: ReceivedRequest = { path, headers: request.headers, body, at: Date.now() };
      received.push(entry);
      const count = received.filter((item) => item.path === path).length;
      const configured = answers.get(path);
      const answer = (typeof configured === 'function' ? configured(entry, count) : configured) ?? {};
      const send = () => {
        if (response.destroyed) return;
        response.writeHead(answer.status ?? 200, { 'content-type': 'application/json', ...answer.headers });
        response.end(JSON.stringify(answer.body ?? { status: 'ok', message: 'received' }));
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
      for (const waiter of waiters) waiter();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const at = (path: string) => received.filter((item) => item.path === path);
  return {
    url,
    received,
    at,
    answer: (path, answer) => void answers.set(path, answer),
    waitFor: (path, count, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (at(path).length >= count) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(at(path));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${path} received ${at(path).length} of ${count} requests within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
