import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A local server speaking Have I Been Pwned's range API (`GET /range/<first 5 hex of SHA-1>`). */
export interface BreachList {
  /** For AUTH_PASSWORD_HIBP_API_URL. */
  url: string;
  /** The paths asked for, in order. */
  requests: string[];
  /** While true, every request is answered 503. */
  failing: boolean;
  close(): Promise<void>;
}

/** Lists `breached` (and, as the real API pads its answers, entries with a count of 0). */
export async function startBreachList(breached: string): Promise<BreachList> {
  const digest = createHash('sha1').update(breached).digest('hex').toUpperCase();
  const server = http.createServer((request, response) => {
    list.requests.push(request.url ?? '');
    if (list.failing) return void response.writeHead(503).end();
    const prefix = request.url?.split('/').pop() ?? '';
    const lines = ['0018A45C4D1DEF81644B54AB7F969B88D65:0', '00D4F6E8FA6EECAD2A3AA415EEC418D38EC:2'];
    if (digest.startsWith(prefix)) lines.push(`${digest.slice(5)}:24230577`);
    response.writeHead(200, { 'content-type': 'text/plain' }).end(lines.join('\r\n'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const list: BreachList = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: [],
    failing: false,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return list;
}
