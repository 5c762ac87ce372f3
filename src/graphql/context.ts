import type { FastifyBaseLogger } from 'fastify';
import type { Session } from '../http/session';

/** What every resolver receives: the caller's session, and a logger bound to the request. */
export interface GraphQLContext {
  session: Session;
  requestId: string;
  logger: FastifyBaseLogger;
}
