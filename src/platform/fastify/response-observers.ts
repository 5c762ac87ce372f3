import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Something that looks at every response once it is sent: the request, the reply and its route as routed. */
export type ResponseObserver = (request: FastifyRequest, reply: FastifyReply, route: FastifyRequest['routeOptions']) => void;

/**
 * One onResponse hook for every observer (metrics, request outcomes): each hook of its own would
 * cost every request a call through Fastify's hook runner and a read of `request.routeOptions`,
 * which Fastify builds anew on each read.
 */
export function observeResponses(app: FastifyInstance, observers: readonly ResponseObserver[]): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions;
    for (const observe of observers) observe(request, reply, route);
    done();
  });
}
