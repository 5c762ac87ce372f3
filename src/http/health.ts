import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { Metrics, MetricsAccess } from '../platform/metrics';
import { registerMetricsRoute } from './metrics-route';
import { installErrorHandling } from './errors';

const readiness = (status: string, database: string, description: string) => ({
  description,
  type: 'object',
  properties: { status: { type: 'string', const: status }, database: { type: 'string', const: database } },
  required: ['status', 'database'],
});

/** Liveness, and readiness (503 when the database does not answer). */
export function registerHealthRoutes(app: FastifyInstance, dataSource: DataSource): void {
  const alive = { description: 'The process serves requests', type: 'object', properties: { status: { type: 'string', const: 'ok' } }, required: ['status'] };
  app.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness', response: { 200: alive } } }, async () => ({ status: 'ok' }));
  const ready = {
    tags: ['health'],
    summary: 'Readiness',
    response: { 200: readiness('ready', 'ok', 'The database answers'), 503: readiness('unavailable', 'unreachable', 'The database does not answer') },
  };
  app.get('/readyz', { schema: ready }, async (_request, reply) => {
    try {
      await dataSource.query('SELECT 1');
      return { status: 'ready', database: 'ok' };
    } catch (error) {
      reply.log.warn({ err: error }, 'readiness check: database unreachable');
      return reply.code(503).send({ status: 'unavailable', database: 'unreachable' });
    }
  });
}

/** The HTTP server of a process without the api role: the health probes and /metrics, nothing else. */
export function buildProbeApp(options: { logger: Logger; dataSource: DataSource; metrics: Metrics; metricsAccess: MetricsAccess }): FastifyInstance {
  const app = Fastify({ loggerInstance: options.logger as FastifyBaseLogger });
  installErrorHandling(app);
  registerHealthRoutes(app, options.dataSource);
  registerMetricsRoute(app, options.metrics, options.metricsAccess);
  return app;
}
