import type { FastifyInstance, RouteOptions } from 'fastify';

/** The request phases whose hooks run after routing, and so can belong to a route. */
type RoutedPhase = 'preParsing' | 'preValidation' | 'preHandler';

/** One hook of `phase` (a route takes one or a list). */
type RouteHook<P extends RoutedPhase> = Exclude<NonNullable<RouteOptions[P]>, readonly unknown[]>;

/**
 * Adds `hook` to the routes registered from now on for which `applies` holds, ahead of their own
 * hooks of that phase (where a global hook would run). A global hook that returns at once for the
 * other routes still costs each of their requests a call through Fastify's hook runner, a
 * noticeable share of the GraphQL route's cheapest queries.
 */
export function addRouteHook<P extends RoutedPhase>(app: FastifyInstance, phase: P, applies: (route: RouteOptions) => boolean, hook: RouteHook<P>): void {
  app.addHook('onRoute', (route) => {
    if (!applies(route)) return;
    const own = route[phase] as RouteHook<P> | RouteHook<P>[] | undefined;
    (route as Record<RoutedPhase, unknown>)[phase] = own === undefined ? hook : [hook, ...(Array.isArray(own) ? own : [own])];
  });
}

/** Methods whose REST routes only read (their requests carry no body). */
export const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether a route is a REST one (not GraphQL) taking a method that may carry a body and write. */
export function isRestRouteWithBody(route: RouteOptions): boolean {
  return route.config?.errorFormat !== 'graphql' && (Array.isArray(route.method) ? route.method : [route.method]).some((method) => !READ_METHODS.has(method));
}
