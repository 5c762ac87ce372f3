import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { PostgresPubSub } from '../../src/graphql/pubsub';
import { buildPlinthSchema, ResolverContainer } from '../../src/graphql/schema';
import { buildHttpApp } from '../../src/http/app';
import { createLogger } from '../../src/main';
import { AuthResolver } from '../../src/modules/auth/auth.resolver';
import { AuthService } from '../../src/modules/auth/auth.service';
import { User } from '../../src/modules/users/user.entity';
import { UsersResolver } from '../../src/modules/users/users.resolver';
import { usersActions } from '../../src/modules/users/users.routes';
import { UsersService } from '../../src/modules/users/users.service';
import { createRateLimits } from '../../src/platform/rate-limits';
import { ADMIN_SECRET, testEnvironment } from './server';

export interface LimitedServer {
  url: string;
  graphqlUrl: string;
  wsUrl: string;
  close(): Promise<void>;
}

/**
 * The server startServer composes, plus the two options main.ts does not pass to buildHttpApp
 * yet: `rateLimits` and `trustProxy`. Once main.ts passes them (see docs/decisions.md, "Rate
 * limits"), startTestServer serves the same and this helper can go.
 */
export async function startLimitedServer(databaseUrl: string, overrides: Record<string, string> = {}): Promise<LimitedServer> {
  const config = loadConfig(testEnvironment(databaseUrl, overrides));
  const logger = createLogger(config);
  const dataSource = createDataSource(databaseUrl, 4);
  await dataSource.initialize();
  await runMigrations(dataSource);
  const pubSub = new PostgresPubSub({ url: databaseUrl, query: (sql, parameters) => dataSource.query(sql, parameters), logger });
  await pubSub.start();
  const users = new UsersService(dataSource.getRepository(User), pubSub, { minLength: 8, maxLength: 256 }, logger);
  const container = new ResolverContainer().add(new AuthResolver(new AuthService()), new UsersResolver(users));
  const schema = await buildPlinthSchema({ container, pubSub });
  const sessionSettings = { adminSecret: ADMIN_SECRET, jwtSecret: config.graphql.jwtSecret!, unauthorizedRole: 'anonymous' };
  const app = await buildHttpApp({
    logger,
    schema,
    dataSource,
    apollo: { introspection: true, devMode: false },
    limits: { maxDepth: 15, maxComplexity: 1000 },
    subscriptions: { ...sessionSettings, initTimeoutMs: 3000, maxPayload: 1024 * 1024, devMode: false },
    bodyLimit: 1024 * 1024,
    corsOrigins: '*',
    actionsRoute: '/actions',
    actions: usersActions(users),
    trustProxy: config.trustProxy,
    rateLimits: createRateLimits(config, dataSource, logger),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    url,
    graphqlUrl: `${url}/v1/graphql`,
    wsUrl: `${url.replace(/^http/, 'ws')}/v1/graphql/subscriptions`,
    async close() {
      await app.close();
      await pubSub.close();
      await dataSource.destroy();
    },
  };
}
