import type http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { answerClientError } from '../../http/errors';
import { createHttpServer, identify, type ServerTimeouts } from '../../http/incoming';

/** Where the dashboard's routes sit in the main app's router; on its own port they are at the root. */
export const ADMIN_ROUTE_PREFIX = '/_admin';

/** How often, while the dashboard's server closes, connections left idle by their last answer are closed. */
const IDLE_CONNECTION_SWEEP_MS = 100;

const THROUGH_ADMIN_PORT = Symbol('plinth.adminPort');

/** Whether a request came in on the admin port (the only way to reach the dashboard's routes). */
export function cameThroughAdminPort(request: IncomingMessage): boolean {
  return (request as IncomingMessage & { [THROUGH_ADMIN_PORT]?: true })[THROUGH_ADMIN_PORT] === true;
}

export interface AdminListen {
  host: string;
  port: number;
  /** Ends what keeps connections open (the log streams) before the server closes. */
  beforeClose(): void;
}

/**
 * PLATFORM_ADMIN_PORT: the dashboard listens on its own address (127.0.0.1 by default), serving
 * the routes under ADMIN_ROUTE_PREFIX of the main app's router at its root, so that the error
 * handling, body limits and route schemas are the main port's. Only requests that came in here
 * reach those routes (the routes refuse the others), and nothing else of the main app is reachable
 * here. No CORS: the dashboard's pages are served from the same origin.
 */
export function serveOnAdminPort(app: FastifyInstance, listen: () => AdminListen | undefined): void {
  let server: http.Server | undefined;
  let closing: AdminListen | undefined;
  app.addHook('onReady', async () => {
    const chosen = listen();
    // `plinth build` registers the routes with stand-in services, and a disabled dashboard has no port.
    if (typeof chosen?.port !== 'number') return;
    const listening = createHttpServer((request, response) => {
      identify(request, response);
      (request as IncomingMessage & { [THROUGH_ADMIN_PORT]?: true })[THROUGH_ADMIN_PORT] = true;
      request.url = `${ADMIN_ROUTE_PREFIX}${request.url === '/' ? '' : (request.url ?? '')}`;
      app.routing(request, response);
    }, app.initialConfig as ServerTimeouts);
    listening.on('clientError', answerClientError);
    await new Promise<void>((resolve, reject) => {
      listening.once('error', reject);
      listening.listen(chosen.port, chosen.host, () => resolve());
    });
    server = listening;
    closing = chosen;
    const address = listening.address();
    const port = typeof address === 'object' && address ? address.port : chosen.port;
    const host = chosen.host.includes(':') ? `[${chosen.host}]` : chosen.host;
    app.log.info({ url: `http://${host}:${port}` }, 'the admin dashboard listens on PLATFORM_ADMIN_PORT');
  });
  app.addHook('preClose', async () => closing?.beforeClose());
  app.addHook('onClose', async () => {
    if (!server) return;
    const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
    // Connections are closed as their last answer ends, not after the keep-alive timeout.
    const sweep = setInterval(() => server!.closeIdleConnections(), IDLE_CONNECTION_SWEEP_MS);
    server.closeIdleConnections();
    await closed;
    clearInterval(sweep);
  });
}
