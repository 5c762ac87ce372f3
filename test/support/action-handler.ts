import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request an action handler received. */
export interface ReceivedCall {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: { action: { name: string }; input: Record<string, unknown>; session_variables: Record<string, string>; request_query: string };
}

export type HandlerReply = { status: number; body: string | object; delayMs?: number; headers?: Record<string, string> };

/**
 * A real HTTP server on loopback playing action handlers: each path answers what `routes` says
 * (the call's body in hand), and every call is recorded.
 */
export interface ActionHandlerServer {
  url: string;
  calls: ReceivedCall[];
  /** The answer of a path; the default echoes nothing and answers 404. */
  route(path: string, reply: (call: ReceivedCall) => HandlerReply): void;
  close(): Promise<void>;
}

export async function startActionHandler(): Promise<ActionHandlerServer> {
  const routes = new Map<string, (call: ReceivedCall) => HandlerReply>();
  const calls: ReceivedCall[] = [];
  const delayed = new Set<NodeJS.Timeout>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const call: ReceivedCall = { path: request.url ?? '/', headers: request.headers, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') };
      calls.push(call);
      const route = routes.get(call.path);
      const reply: HandlerReply = route ? route(call) : { status: 404, body: { message: 'no such handler' } };
      const send = () => {
        if (response.destroyed) return;
        const text = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
        response.writeHead(reply.status, { 'content-type': typeof reply.body === 'string' ? 'text/plain' : 'application/json', ...reply.headers });
        response.end(text);
      };
      if (!reply.delayMs) return send();
      // A delayed answer is dropped with its connection (a caller killed while waiting) and at
      // close: its timer (up to a minute) would otherwise keep the Jest worker from exiting.
      const timer = setTimeout(send, reply.delayMs);
      delayed.add(timer);
      response.on('close', () => {
        clearTimeout(timer);
        delayed.delete(timer);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    route: (path, reply) => void routes.set(path, reply),
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of delayed) clearTimeout(timer);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
