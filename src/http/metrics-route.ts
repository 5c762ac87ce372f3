import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { secretsEqual } from '../common/secrets';
import type { ResponseObserver } from '../platform/fastify/response-observers';
import type { Metrics, MetricsAccess } from '../platform/metrics';
import { requires } from '../platform/fastify/security-schemes';

/** Times every HTTP response by its route pattern (never the raw path, whose values are unbounded). */
export function httpMetricsObserver(metrics: Metrics): ResponseObserver {
  return (request, reply, route) => metrics.observeHttp(request.method, route.url ?? '(unmatched)', reply.statusCode, reply.elapsedTime / 1000);
}

/**
 * GET /metrics, as PLINTH_METRICS says: to loopback clients only (behind a trusted proxy, the
 * client address it forwarded), to a bearer token, or not at all (no route).
 */
export function registerMetricsRoute(app: FastifyInstance, metrics: Metrics, access: MetricsAccess): void {
  if (access.mode === 'off') return;
  const refusal = {
    type: 'object',
    properties: { error: { type: 'string' }, message: { type: 'string' } },
    required: ['error', 'message'],
  };
  const schema: FastifySchema = {
    tags: ['health'],
    summary: 'Prometheus metrics',
    description:
      access.mode === 'loopback'
        ? 'Answered to loopback clients only (`PLINTH_METRICS=loopback`); behind a trusted proxy, the forwarded client address decides.'
        : 'Answered to callers with the bearer token `PLINTH_METRICS_TOKEN` (`PLINTH_METRICS=token`).',
    ...(access.mode === 'token' ? { security: requires('metricsToken') } : {}),
    response: {
      200: {
        description: 'The Prometheus text exposition format',
        content: { [metrics.registry.contentType]: { schema: { type: 'string' } } },
      },
      ...(access.mode === 'token'
        ? { 401: { ...refusal, description: 'No token, or a wrong one' } }
        : { 403: { ...refusal, description: 'The client is not on the loopback interface' } }),
    },
  };
  app.get('/metrics', { schema }, async (request, reply) => {
    const refusal = metricsRefusal(request, access);
    if (refusal) {
      if (refusal.status === 401) reply.header('www-authenticate', 'Bearer realm="metrics"');
      return reply.code(refusal.status).send({ error: refusal.status === 401 ? 'unauthorized' : 'forbidden', message: refusal.message });
    }
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}

function metricsRefusal(request: FastifyRequest, access: MetricsAccess): { status: 401 | 403; message: string } | undefined {
  if (access.mode === 'loopback') {
    return isLoopback(request.ip) ? undefined : { status: 403, message: 'metrics are served to loopback clients only (PLINTH_METRICS=loopback)' };
  }
  if (access.mode === 'token') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    return match && secretsEqual(match[1], access.token) ? undefined : { status: 401, message: 'a bearer token (PLINTH_METRICS_TOKEN) is required' };
  }
  return undefined;
}

export function isLoopback(address: string): boolean {
  return /^127\./.test(address) || address === '::1' || /^::ffff:127\./i.test(address);
}
