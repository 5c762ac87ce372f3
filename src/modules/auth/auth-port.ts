import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import { answerClientError } from '../../http/errors';
import { createHttpServer, type ServerTimeouts } from '../../http/incoming';

/**
 * AUTH_PORT (spec 2 §1.4): the auth service also listens on 127.0.0.1:<port>, at its root, as
 * Nhost's auth service does behind the reverse proxy of `auth.<domain>`: `/signin/email-password`
 * there is `/auth/signin/email-password` on the main port. Requests go through the main app's
 * router (`routing`), so hooks, limits and errors are the same; nothing outside /auth is reachable.
 */
export function serveOnAuthPort(app: FastifyInstance, prefix: string, port: () => number | undefined): void {
  let server: http.Server | undefined;
  app.addHook('onReady', async () => {
    const chosen = port();
    // `plinth build` registers the routes with stand-in services: no port, nothing to listen on.
    if (typeof chosen !== 'number') return;
    const listening = createHttpServer((request, response) => {
      request.url = `${prefix}${request.url === '/' ? '' : (request.url ?? '')}`;
      app.dispatch(request, response);
    }, app.initialConfig as ServerTimeouts);
    listening.on('clientError', answerClientError);
    await new Promise<void>((resolve, reject) => {
      listening.once('error', reject);
      listening.listen(chosen, '127.0.0.1', () => resolve());
    });
    server = listening;
    app.log.info({ url: `http://127.0.0.1:${chosen}` }, 'the auth service also listens on AUTH_PORT');
  });
  app.addHook('onClose', async () => {
    if (!server) return;
    const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
    server.closeIdleConnections();
    await closing;
  });
}
