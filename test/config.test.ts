import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AREAS, ConfigError, loadConfig } from '../src/config';
import { environmentSchema } from '../src/config/environment';
import { configurationReference } from '../src/config/reference';
import { withDevelopmentSecrets } from '../src/config/dev-secrets';
import { environmentWithEnvFile } from '../src/config/env-file';

const VALID_JWT = JSON.stringify({ type: 'HS256', key: 'k'.repeat(32) });
/** The least a production start needs. */
const PRODUCTION = {
  NODE_ENV: 'production',
  GQL_GRAPHQL_ADMIN_SECRET: 'a'.repeat(32),
  GQL_GRAPHQL_JWT_SECRET: VALID_JWT,
  STORAGE_URL_SIGNING_SECRET: 's'.repeat(32),
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('the configuration was accepted');
}

describe('loadConfig', () => {
  it('has the defaults of the spec', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      env: 'development',
      host: '0.0.0.0',
      port: 8080,
      actionsRoute: '/actions',
      requestTimeoutMs: 300_000,
      requestMaxJsonDepth: 64,
      database: { url: undefined, poolSize: 10, embeddedPort: 5433, dataDir: path.resolve('.data') },
      graphql: {
        unauthorizedRole: 'anonymous',
        introspection: true,
        devMode: false,
        maxDepth: 15,
        maxComplexity: 1000,
        bodyLimit: 1048576,
        corsOrigins: '*',
        wsLimits: { connectionsPerUser: 20, subscriptionsPerConnection: 100, subscriptionsPerUser: 200 },
      },
      auth: { passwordMinLength: 8, serverUrl: 'http://localhost:8080/auth', invitationTtlSeconds: 604_800 },
      actions: { bulkCreateMaxUsers: 1000 },
      files: {
        maxBytes: 10 * 1024 * 1024,
        // The file in base64 plus 64 KiB for the rest of the request.
        uploadBodyLimit: 4 * Math.ceil((10 * 1024 * 1024) / 3) + 64 * 1024,
        allowedTypes: ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'text/csv', 'application/json', 'text/plain', 'application/pdf'],
        urlTtlSeconds: 3600,
        reportUrlTtlSeconds: 3600,
      },
      storage: { driver: 'postgres', localDir: path.resolve('.data/storage'), signingSecret: undefined },
      trustProxy: false,
      rateLimit: {
        store: 'memory',
        registration: { points: 5, durationSeconds: 60 },
        engine: { points: 1000, durationSeconds: 60 },
        uploads: { points: 100, durationSeconds: 3600 },
        reports: { points: 20, durationSeconds: 3600 },
        checkouts: { points: 60, durationSeconds: 3600 },
      },
      outboundHttp: { connectTimeoutMs: 5000, timeoutMs: 30000, maxResponseBytes: 10485760, maxConnectionsPerOrigin: 32 },
      publicUrl: 'http://localhost:8080',
      mail: {
        smtp: undefined,
        from: { address: 'noreply@localhost', name: 'Plinth' },
        templatesDir: path.resolve('email-templates'),
        templateCacheSize: 100,
        retryLimit: 10,
        retryDelaySeconds: 30,
      },
      projectName: 'Plinth',
      pluginsDir: path.resolve('plugins'),
      servicesDir: path.resolve('services'),
      build: { distDir: path.resolve('.nself/dist'), proxyConfDir: path.resolve('nginx/conf.d') },
      apiDocs: {
        enabled: true,
        path: '/docs',
        title: 'Plinth API',
        theme: 'default',
        bearerToken: undefined,
        graphql: { enabled: true, endpoint: '/v1/graphql' },
        hiddenPrefixes: [],
      },
      processRoles: ['api', 'worker'],
      jobs: {
        defaults: { concurrency: 4, retryLimit: 3, retryDelaySeconds: 2, retryBackoff: true, timeoutSeconds: 30 },
        queues: {},
        pollIntervalSeconds: 2,
        maintenanceIntervalSeconds: 10,
        shutdownGraceSeconds: 5,
      },
    });
  });

  it('reads the process roles, and per-queue job settings by queue variable name', () => {
    expect(loadConfig({ PLINTH_PROCESS_ROLES: ' worker ' }).processRoles).toEqual(['worker']);
    expect(loadConfig({ PLINTH_PROCESS_ROLES: 'worker,api,worker' }).processRoles).toEqual(['worker', 'api']);
    const config = loadConfig({
      JOBS_DEFAULT_RETRY_BACKOFF: 'false',
      JOBS_MAIL_CONCURRENCY: '8',
      JOBS_MAIL_RETRY_DELAY_SECONDS: '60',
      JOBS_REPORT_RENDER_TIMEOUT_SECONDS: '600',
      JOBS_REPORT_RENDER_RETRY_BACKOFF: 'no',
    });
    expect(config.jobs.defaults.retryBackoff).toBe(false);
    expect(config.jobs.queues).toEqual({
      MAIL: { concurrency: 8, retryDelaySeconds: 60 },
      REPORT_RENDER: { timeoutSeconds: 600, retryBackoff: false },
    });
  });

  it('reads the files and storage settings: types lower-cased and deduplicated, the folder under the data folder', () => {
    const config = loadConfig({
      FILES_MAX_BYTES: '3000',
      FILES_ALLOWED_TYPES: 'Image/PNG, text/csv,image/png',
      STORAGE_DRIVER: 'local',
      PLINTH_DATA_DIR: '/var/lib/plinth',
      STORAGE_URL_SIGNING_SECRET: 's'.repeat(32),
    });
    expect(config.files).toMatchObject({ maxBytes: 3000, uploadBodyLimit: 4000 + 65536, allowedTypes: ['image/png', 'text/csv'] });
    expect(config.storage).toEqual({ driver: 'local', localDir: '/var/lib/plinth/storage', signingSecret: 's'.repeat(32) });
    expect(loadConfig({ STORAGE_LOCAL_DIR: '/srv/files' }).storage.localDir).toBe('/srv/files');
  });

  it('reads the API reference settings (spec 1 §2.7)', () => {
    const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm9uIn0.c2lnbmF0dXJl';
    const config = loadConfig({
      PLINTH_PROJECT_NAME: 'Acme',
      API_DOCS_ENABLED: 'false',
      API_DOCS_PATH: '/reference/v1',
      API_DOCS_THEME: 'solarized',
      API_DOCS_AUTH_ENV_VAR: 'DOCS_ANON_JWT',
      DOCS_ANON_JWT: token,
      API_DOCS_GRAPHQL_ENABLED: 'false',
      API_DOCS_GRAPHQL_ENDPOINT: '/graphql',
      API_DOCS_HIDE_ENDPOINTS: '/admin/, /internal,/metrics',
      PLINTH_DIST_DIR: 'out/dist',
      PLINTH_PROXY_CONF_DIR: '/etc/nginx/conf.d',
    });
    expect(config.apiDocs).toEqual({
      enabled: false,
      path: '/reference/v1',
      title: 'Acme API',
      theme: 'solarized',
      bearerToken: token,
      graphql: { enabled: false, endpoint: '/graphql' },
      hiddenPrefixes: ['/admin', '/internal', '/metrics'],
    });
    expect(config.build).toEqual({ distDir: path.resolve('out/dist'), proxyConfDir: '/etc/nginx/conf.d' });
    expect(loadConfig({ PLINTH_PROJECT_NAME: 'Acme', API_DOCS_TITLE: 'Acme reference' }).apiDocs.title).toBe('Acme reference');
    expect(loadConfig({ API_DOCS_PATH: '/' }).apiDocs.path).toBe('/');
  });

  it('never repeats the token API_DOCS_AUTH_ENV_VAR names', () => {
    expect(problemsOf({ API_DOCS_AUTH_ENV_VAR: 'DOCS_JWT', DOCS_JWT: 'hunter2 is not a jwt' })).toEqual([
      'DOCS_JWT (named by API_DOCS_AUTH_ENV_VAR) must be a JWT',
    ]);
  });

  it('builds the public addresses from PORT, PLINTH_PUBLIC_URL and AUTH_SERVER_URL', () => {
    expect(loadConfig({ PORT: '9000' })).toMatchObject({ publicUrl: 'http://localhost:9000', auth: { serverUrl: 'http://localhost:9000/auth' } });
    expect(loadConfig({ PLINTH_PUBLIC_URL: 'https://api.example.com/plinth' })).toMatchObject({
      publicUrl: 'https://api.example.com/plinth',
      auth: { serverUrl: 'https://api.example.com/plinth/auth' },
    });
    expect(loadConfig({ PLINTH_PUBLIC_URL: 'https://api.example.com', AUTH_SERVER_URL: 'https://auth.example.com' }).auth.serverUrl).toBe(
      'https://auth.example.com',
    );
  });

  it('reads the SMTP settings when SMTP_HOST is set, with their defaults', () => {
    expect(loadConfig({ SMTP_HOST: 'smtp.example.com' }).mail.smtp).toEqual({
      host: 'smtp.example.com',
      port: 587,
      user: undefined,
      password: undefined,
      secure: 'starttls',
      connectionTimeoutMs: 10_000,
      greetingTimeoutMs: 10_000,
      socketTimeoutMs: 60_000,
      poolSize: 5,
    });
    const smtp = loadConfig({ SMTP_HOST: 'mail', SMTP_PORT: '465', SMTP_SECURE: 'tls', SMTP_USER: 'u', SMTP_PASSWORD: ' p w ' }).mail.smtp;
    expect(smtp).toMatchObject({ port: 465, secure: 'tls', user: 'u', password: ' p w ' });
  });

  it.each([
    ['true', true],
    ['false', false],
    ['2', 2],
    ['0', 0],
    ['10.0.0.1', ['10.0.0.1']],
    ['10.0.0.0/8, loopback,fd00::/8', ['10.0.0.0/8', 'loopback', 'fd00::/8']],
  ])('reads TRUST_PROXY=%s as %j', (value, expected) => {
    expect(loadConfig({ TRUST_PROXY: value }).trustProxy).toEqual(expected);
  });

  it('reads GQL_GRAPHQL_JWT_SECRET as the engine does, with a default claims namespace', () => {
    const config = loadConfig({ GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS512', key: 's'.repeat(64), claims_namespace: 'https://x/claims' }) });
    expect(config.graphql.jwtSecret).toEqual({
      type: 'HS512',
      key: 's'.repeat(64),
      claims_namespace: 'https://x/claims',
      claims_format: 'json',
      allowed_skew: 0,
    });
    expect(loadConfig({ GQL_GRAPHQL_JWT_SECRET: VALID_JWT }).graphql.jwtSecret!.claims_namespace).toBe('https://plinth.dev/jwt/claims');
  });

  it('takes the action route prefix from the CS_<N> declaration whose template is plinth', () => {
    const config = loadConfig({ CS_1: 'api:express-ts:3000:/api', CS_2: 'hooks:plinth:8080:/hooks' });
    expect(config.actionsRoute).toBe('/hooks');
    expect(config.customServices.map((service) => service.name)).toEqual(['api', 'hooks']);
  });

  it("takes a custom service's host override from CS_<N>_HOST, and the action engine's settings", () => {
    const config = loadConfig({ CS_1: 'api:express-ts:3000:/api', CS_1_HOST: '127.0.0.1', ACTIONS_HANDLER_TIMEOUT_SECONDS: '12' });
    expect(config.customServices[0]).toMatchObject({ name: 'api', host: '127.0.0.1', port: 3000, route: '/api' });
    expect(config.actionEngine).toEqual({ handlerTimeoutSeconds: 12, serviceRestartMaxDelayMs: 30_000, handlerRateLimit: { points: 5, durationSeconds: 60 } });
  });

  it('runs queries compiled by default, 16 MiB of compiled operations kept, and reads both settings', () => {
    expect(loadConfig({}).graphql.compiledExecution).toEqual({ enabled: true, cacheBytes: 16 * 1024 * 1024 });
    expect(loadConfig({ GQL_GRAPHQL_COMPILED_EXECUTION: 'false', GQL_GRAPHQL_COMPILED_CACHE_BYTES: '2097152' }).graphql.compiledExecution).toEqual({
      enabled: false,
      cacheBytes: 2 * 1024 * 1024,
    });
  });

  it('gives back the start-up’s memory once by default, and collects after every quiet spell only when PLINTH_IDLE_COLLECTION_MS is set', () => {
    expect(loadConfig({})).toMatchObject({ startUpCollection: true, idleCollectionMs: 0 });
    expect(loadConfig({ PLINTH_STARTUP_COLLECTION: 'false', PLINTH_IDLE_COLLECTION_MS: '5000' })).toMatchObject({
      startUpCollection: false,
      idleCollectionMs: 5000,
    });
  });

  it('hashes passwords with argon2id at libsodium’s interactive cost by default, and takes a stronger or equivalent one', () => {
    expect(loadConfig({}).auth.passwordHash).toEqual({ memoryKib: 65_536, iterations: 2, parallelism: 1 });
    // OWASP's equivalent settings: 46 MiB once, 7 MiB five times.
    expect(
      loadConfig({ AUTH_PASSWORD_HASH_MEMORY_KIB: '47104', AUTH_PASSWORD_HASH_ITERATIONS: '1', AUTH_PASSWORD_HASH_PARALLELISM: '4' }).auth.passwordHash,
    ).toEqual({ memoryKib: 47_104, iterations: 1, parallelism: 4 });
    expect(loadConfig({ AUTH_PASSWORD_HASH_MEMORY_KIB: '7168', AUTH_PASSWORD_HASH_ITERATIONS: '5' }).auth.passwordHash.memoryKib).toBe(7_168);
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '' }).port).toBe(8080);
  });

  it.each([
    ['PORT', { PORT: 'eighty' }],
    ['PORT', { PORT: '70000' }],
    ['PORT', { PORT: '80.5' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
    ['NODE_ENV', { NODE_ENV: 'staging' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://root@localhost/db' }],
    ['DATABASE_URL', { DATABASE_URL: 'not a url' }],
    ['DATABASE_POOL_SIZE', { DATABASE_POOL_SIZE: '0' }],
    ['GQL_GRAPHQL_DEV_MODE', { GQL_GRAPHQL_DEV_MODE: 'maybe' }],
    ['GQL_GRAPHQL_MAX_DEPTH', { GQL_GRAPHQL_MAX_DEPTH: '-1' }],
    ['GQL_GRAPHQL_BODY_LIMIT', { GQL_GRAPHQL_BODY_LIMIT: '10' }],
    ['GQL_GRAPHQL_CORS_DOMAIN', { GQL_GRAPHQL_CORS_DOMAIN: 'example.com' }],
    ['GQL_GRAPHQL_COMPILED_EXECUTION', { GQL_GRAPHQL_COMPILED_EXECUTION: 'fast' }],
    ['GQL_GRAPHQL_COMPILED_CACHE_BYTES', { GQL_GRAPHQL_COMPILED_CACHE_BYTES: '1000' }],
    ['GQL_GRAPHQL_COMPILED_CACHE_BYTES', { GQL_GRAPHQL_COMPILED_CACHE_BYTES: '32MiB' }],
    ['GQL_GRAPHQL_COMPILED_CACHE_ENTRIES', { GQL_GRAPHQL_COMPILED_CACHE_ENTRIES: '1000' }],
    ['GQL_GRAPHQL_JWT_SECRET', { GQL_GRAPHQL_JWT_SECRET: '{not json' }],
    ['GQL_GRAPHQL_JWT_SECRET.key', { GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'short' }) }],
    ['GQL_GRAPHQL_JWT_SECRET.type', { GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'none', key: 'k'.repeat(32) }) }],
    ['GQL_GRAPHQL_JWT_SECRET.key', { GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'RS256', key: 'k'.repeat(32) }) }],
    ['GQL_GRAPHQL_JWT_SECRET.key', { GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256' }) }],
    ['GQL_GRAPHQL_JWT_SECRET', { GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'k'.repeat(32), algo: 'x' }) }],
    ['AUTH_PASSWORD_MIN_LENGTH', { AUTH_PASSWORD_MIN_LENGTH: '0' }],
    ['AUTH_PASSWORD_MAX_LENGTH', { AUTH_PASSWORD_MIN_LENGTH: '64', AUTH_PASSWORD_MAX_LENGTH: '32' }],
    ['AUTH_PASSWORD_HASH_MEMORY_KIB', { AUTH_PASSWORD_HASH_MEMORY_KIB: '4096' }],
    ['AUTH_PASSWORD_HASH_MEMORY_KIB', { AUTH_PASSWORD_HASH_MEMORY_KIB: '19456', AUTH_PASSWORD_HASH_ITERATIONS: '1' }],
    ['AUTH_PASSWORD_HASH_ITERATIONS', { AUTH_PASSWORD_HASH_ITERATIONS: '0' }],
    ['AUTH_PASSWORD_HASH_PARALLELISM', { AUTH_PASSWORD_HASH_PARALLELISM: '17' }],
    ['AUTH_INVITATION_TTL_SECONDS', { AUTH_INVITATION_TTL_SECONDS: '0' }],
    ['ACTIONS_BULK_CREATE_MAX_USERS', { ACTIONS_BULK_CREATE_MAX_USERS: '0' }],
    ['FILES_MAX_BYTES', { FILES_MAX_BYTES: '0' }],
    ['FILES_ALLOWED_TYPES', { FILES_ALLOWED_TYPES: 'png,jpeg' }],
    ['FILES_ALLOWED_TYPES', { FILES_ALLOWED_TYPES: ' , ' }],
    ['FILES_URL_TTL_SECONDS', { FILES_URL_TTL_SECONDS: '5' }],
    ['REPORTS_URL_TTL_SECONDS', { REPORTS_URL_TTL_SECONDS: 'an hour' }],
    ['STORAGE_DRIVER', { STORAGE_DRIVER: 's3' }],
    ['STORAGE_URL_SIGNING_SECRET', { STORAGE_URL_SIGNING_SECRET: 'too-short' }],
    ['LOG_FORMAT', { LOG_FORMAT: 'xml' }],
    ['PLINTH_METRICS', { PLINTH_METRICS: 'public' }],
    ['PLINTH_METRICS_TOKEN', { PLINTH_METRICS: 'token' }],
    ['PLINTH_METRICS_TOKEN', { PLINTH_METRICS: 'token', PLINTH_METRICS_TOKEN: 'short' }],
    ['TRUST_PROXY', { TRUST_PROXY: 'yes' }],
    ['TRUST_PROXY', { TRUST_PROXY: '10.0.0.0/33' }],
    ['TRUST_PROXY', { TRUST_PROXY: '10.0.0.1,' }],
    ['TRUST_PROXY', { TRUST_PROXY: '101' }],
    ['HTTP_REQUEST_TIMEOUT_SECONDS', { HTTP_REQUEST_TIMEOUT_SECONDS: '-1' }],
    ['HTTP_REQUEST_TIMEOUT_SECONDS', { HTTP_REQUEST_TIMEOUT_SECONDS: '5 minutes' }],
    ['REQUEST_MAX_JSON_DEPTH', { REQUEST_MAX_JSON_DEPTH: '1' }],
    ['REQUEST_MAX_JSON_DEPTH', { REQUEST_MAX_JSON_DEPTH: '1001' }],
    ['REQUEST_MAX_JSON_DEPTH', { REQUEST_MAX_JSON_DEPTH: 'deep' }],
    ['RATE_LIMIT_STORE', { RATE_LIMIT_STORE: 'redis' }],
    ['RATE_LIMIT_REGISTRATION_POINTS', { RATE_LIMIT_REGISTRATION_POINTS: '0' }],
    ['RATE_LIMIT_REGISTRATION_DURATION_SECONDS', { RATE_LIMIT_REGISTRATION_DURATION_SECONDS: '1.5' }],
    ['RATE_LIMIT_ENGINE_POINTS', { RATE_LIMIT_ENGINE_POINTS: '0' }],
    ['RATE_LIMIT_ENGINE_POINTS', { RATE_LIMIT_ENGINE_POINTS: 'plenty' }],
    ['RATE_LIMIT_ENGINE_DURATION_SECONDS', { RATE_LIMIT_ENGINE_DURATION_SECONDS: '86401' }],
    ['RATE_LIMIT_UPLOADS_POINTS', { RATE_LIMIT_UPLOADS_POINTS: '0' }],
    ['RATE_LIMIT_UPLOADS_DURATION_SECONDS', { RATE_LIMIT_UPLOADS_DURATION_SECONDS: 'an hour' }],
    ['RATE_LIMIT_REPORTS_POINTS', { RATE_LIMIT_REPORTS_POINTS: '-3' }],
    ['RATE_LIMIT_REPORTS_DURATION_SECONDS', { RATE_LIMIT_REPORTS_DURATION_SECONDS: '86401' }],
    ['RATE_LIMIT_CHECKOUTS_POINTS', { RATE_LIMIT_CHECKOUTS_POINTS: 'many' }],
    ['RATE_LIMIT_CHECKOUTS_DURATION_SECONDS', { RATE_LIMIT_CHECKOUTS_DURATION_SECONDS: '0' }],
    ['GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER', { GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER: '0' }],
    ['GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION', { GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION: '1.5' }],
    ['GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_USER', { GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_USER: 'none' }],
    ['OUTBOUND_HTTP_CONNECT_TIMEOUT_MS', { OUTBOUND_HTTP_CONNECT_TIMEOUT_MS: '0' }],
    ['OUTBOUND_HTTP_TIMEOUT_MS', { OUTBOUND_HTTP_TIMEOUT_MS: 'soon' }],
    ['OUTBOUND_HTTP_MAX_RESPONSE_BYTES', { OUTBOUND_HTTP_MAX_RESPONSE_BYTES: '-1' }],
    ['OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN', { OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN: '0' }],
    ['PLINTH_PUBLIC_URL', { PLINTH_PUBLIC_URL: 'api.example.com' }],
    ['PLINTH_PUBLIC_URL', { PLINTH_PUBLIC_URL: 'https://api.example.com/' }],
    ['PLINTH_PUBLIC_URL', { PLINTH_PUBLIC_URL: 'ftp://api.example.com' }],
    ['PLINTH_PUBLIC_URL', { PLINTH_PUBLIC_URL: 'https://api.example.com?x=1' }],
    ['PLINTH_PUBLIC_URL', { PLINTH_PUBLIC_URL: 'https://user:pw@api.example.com' }],
    ['AUTH_SERVER_URL', { AUTH_SERVER_URL: 'https://auth.example.com/#top' }],
    ['SMTP_HOST', { SMTP_HOST: '   ' }],
    ['SMTP_PORT', { SMTP_PORT: '0' }],
    ['SMTP_USER', { SMTP_USER: 'someone' }],
    ['SMTP_USER', { SMTP_PASSWORD: 'a-password' }],
    ['SMTP_SECURE', { SMTP_SECURE: 'ssl' }],
    ['SMTP_CONNECTION_TIMEOUT_MS', { SMTP_CONNECTION_TIMEOUT_MS: '10s' }],
    ['SMTP_GREETING_TIMEOUT_MS', { SMTP_GREETING_TIMEOUT_MS: '0' }],
    ['SMTP_SOCKET_TIMEOUT_MS', { SMTP_SOCKET_TIMEOUT_MS: '-5' }],
    ['SMTP_POOL_SIZE', { SMTP_POOL_SIZE: '0' }],
    ['AUTH_EMAIL_FROM', { AUTH_EMAIL_FROM: 'noreply' }],
    ['AUTH_EMAIL_FROM', { AUTH_EMAIL_FROM: 'Plinth <noreply@example.com>' }],
    ['AUTH_EMAIL_FROM_NAME', { AUTH_EMAIL_FROM_NAME: 'Plinth\r\nBcc: eve@example.com' }],
    ['AUTH_EMAIL_TEMPLATES_DIR', { AUTH_EMAIL_TEMPLATES_DIR: ' ' }],
    ['MAIL_TEMPLATE_CACHE_SIZE', { MAIL_TEMPLATE_CACHE_SIZE: '0' }],
    ['MAIL_RETRY_LIMIT', { MAIL_RETRY_LIMIT: 'many' }],
    ['MAIL_RETRY_DELAY_SECONDS', { MAIL_RETRY_DELAY_SECONDS: '0' }],
    ['PLINTH_PROJECT_NAME', { PLINTH_PROJECT_NAME: 'Acme\nInc' }],
    ['PLINTH_PLUGINS_DIR', { PLINTH_PLUGINS_DIR: ' ' }],
    ['PLINTH_SERVICES_DIR', { PLINTH_SERVICES_DIR: ' ' }],
    ['PLINTH_DIST_DIR', { PLINTH_DIST_DIR: ' ' }],
    ['PLINTH_PROXY_CONF_DIR', { PLINTH_PROXY_CONF_DIR: ' ' }],
    ['API_DOCS_ENABLED', { API_DOCS_ENABLED: 'sometimes' }],
    ['API_DOCS_PATH', { API_DOCS_PATH: 'docs' }],
    ['API_DOCS_PATH', { API_DOCS_PATH: '/docs/' }],
    ['API_DOCS_PATH', { API_DOCS_PATH: '/api-docs' }],
    ['API_DOCS_PATH', { API_DOCS_PATH: '/v1/graphql/docs' }],
    ['API_DOCS_TITLE', { API_DOCS_TITLE: 'Two\nlines' }],
    ['API_DOCS_THEME', { API_DOCS_THEME: 'dark' }],
    ['API_DOCS_AUTH_ENV_VAR', { API_DOCS_AUTH_ENV_VAR: 'not a name' }],
    ['API_DOCS_AUTH_ENV_VAR', { API_DOCS_AUTH_ENV_VAR: 'DOCS_JWT' }],
    ['API_DOCS_GRAPHQL_ENABLED', { API_DOCS_GRAPHQL_ENABLED: 'on' }],
    ['API_DOCS_GRAPHQL_ENDPOINT', { API_DOCS_GRAPHQL_ENDPOINT: 'graphql' }],
    ['API_DOCS_HIDE_ENDPOINTS', { API_DOCS_HIDE_ENDPOINTS: 'admin' }],
    ['API_DOCS_HIDE_ENDPOINTS', { API_DOCS_HIDE_ENDPOINTS: '/admin,' }],
    ['CS_1', { CS_1: 'just-a-name' }],
    ['CS_1', { CS_1: 'svc:express-ts:99999:/api' }],
    ['CS_2', { CS_1: 'svc:express-ts:3000:/a', CS_2: 'svc:fastapi:3001:/b' }],
    ['CS_1', { CS_1: 'svc:rails:3000:/api' }],
    ['CS_1_HOST', { CS_1: 'svc:express-ts:3000:/api', CS_1_HOST: 'not a host' }],
    ['ACTIONS_HANDLER_TIMEOUT_SECONDS', { ACTIONS_HANDLER_TIMEOUT_SECONDS: '0' }],
    ['ACTIONS_SERVICE_RESTART_MAX_DELAY_MS', { ACTIONS_SERVICE_RESTART_MAX_DELAY_MS: 'soon' }],
    ['RATE_LIMIT_ACTION_HANDLERS_POINTS', { RATE_LIMIT_ACTION_HANDLERS_POINTS: '0' }],
    ['RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS', { RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS: '-1' }],
    ['PLINTH_PROCESS_ROLES', { PLINTH_PROCESS_ROLES: 'web' }],
    ['PLINTH_PROCESS_ROLES', { PLINTH_PROCESS_ROLES: 'api,scheduler' }],
    ['PLINTH_PROCESS_ROLES', { PLINTH_PROCESS_ROLES: ' , ' }],
    ['JOBS_DEFAULT_CONCURRENCY', { JOBS_DEFAULT_CONCURRENCY: '0' }],
    ['JOBS_DEFAULT_RETRY_LIMIT', { JOBS_DEFAULT_RETRY_LIMIT: '-1' }],
    ['JOBS_DEFAULT_RETRY_DELAY_SECONDS', { JOBS_DEFAULT_RETRY_DELAY_SECONDS: 'soon' }],
    ['JOBS_DEFAULT_RETRY_BACKOFF', { JOBS_DEFAULT_RETRY_BACKOFF: 'doubling' }],
    ['JOBS_DEFAULT_TIMEOUT_SECONDS', { JOBS_DEFAULT_TIMEOUT_SECONDS: '86400' }],
    ['JOBS_POLL_INTERVAL_SECONDS', { JOBS_POLL_INTERVAL_SECONDS: '0.5' }],
    ['JOBS_MAINTENANCE_INTERVAL_SECONDS', { JOBS_MAINTENANCE_INTERVAL_SECONDS: '0' }],
    ['JOBS_SHUTDOWN_GRACE_SECONDS', { JOBS_SHUTDOWN_GRACE_SECONDS: 'long' }],
    ['JOBS_SHUTDOWN_GRACE_SECONDS', { JOBS_SHUTDOWN_GRACE_SECONDS: '10' }],
    ['JOBS_MAIL_CONCURRENCY', { JOBS_MAIL_CONCURRENCY: 'many' }],
    ['JOBS_MAIL_RETRY_LIMIT', { JOBS_MAIL_RETRY_LIMIT: '1.5' }],
    ['JOBS_MAIL_RETRY_DELAY_SECONDS', { JOBS_MAIL_RETRY_DELAY_SECONDS: '-5' }],
    ['JOBS_MAIL_RETRY_BACKOFF', { JOBS_MAIL_RETRY_BACKOFF: 'sometimes' }],
    ['JOBS_REPORT_RENDER_TIMEOUT_SECONDS', { JOBS_REPORT_RENDER_TIMEOUT_SECONDS: '0' }],
    ['PLINTH_STARTUP_COLLECTION', { PLINTH_STARTUP_COLLECTION: 'sometimes' }],
  ])('stops with a message naming %s for %j', (variable, env) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0].startsWith(`${variable} `)).toBe(true);
  });

  it('reports every bad variable at once', () => {
    expect(
      problemsOf({ PORT: 'x', LOG_LEVEL: 'y', CS_1: 'z' })
        .map((problem) => problem.split(' ')[0])
        .sort(),
    ).toEqual(['CS_1', 'LOG_LEVEL', 'PORT']);
  });

  it('never repeats a secret in its message', () => {
    const [problem] = problemsOf({ GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'hunter2-is-short' }) });
    expect(problem).not.toContain('hunter2');
    const [token] = problemsOf({ PLINTH_METRICS: 'token', PLINTH_METRICS_TOKEN: 'hunter3' });
    expect(token).not.toContain('hunter3');
    expect(problemsOf({ SMTP_PASSWORD: 'hunter2' })).toEqual(['SMTP_USER and SMTP_PASSWORD must be set together']);
  });

  it('refuses to run in production without the admin secret, the JWT secret and the key of signed links', () => {
    expect(problemsOf({ NODE_ENV: 'production' })).toEqual([
      'GQL_GRAPHQL_ADMIN_SECRET is required when NODE_ENV=production',
      'GQL_GRAPHQL_JWT_SECRET is required when NODE_ENV=production',
      'STORAGE_URL_SIGNING_SECRET is required when NODE_ENV=production (the key of signed file and report links)',
    ]);
    const { STORAGE_URL_SIGNING_SECRET: _key, ...withoutLinkKey } = PRODUCTION;
    expect(problemsOf(withoutLinkKey)).toEqual(['STORAGE_URL_SIGNING_SECRET is required when NODE_ENV=production (the key of signed file and report links)']);
    expect(loadConfig(PRODUCTION)).toMatchObject({ env: 'production', storage: { signingSecret: 's'.repeat(32) } });
    // Outside production the key may be left to derivation from the admin secret.
    expect(loadConfig({ ...withoutLinkKey, NODE_ENV: 'development' }).storage.signingSecret).toBeUndefined();
  });

  it.each([
    ['GQL_GRAPHQL_ADMIN_SECRET', {}],
    ['ADMIN_KEY', {}],
    ['PLINTH_METRICS_TOKEN', { PLINTH_METRICS: 'token' }],
    ['BACKUP_PROVIDER_WEBHOOK_SECRET', {}],
    ['EXTERNAL_WEBHOOK_GITHUB_SECRET', {}],
  ])('refuses %s below 32 characters in production, naming it and never its value', (variable, extra) => {
    const short = `weak-${'x'.repeat(26)}`;
    const problems = problemsOf({ ...PRODUCTION, ...extra, [variable]: short });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      new RegExp(`^${variable} must be (at least 32 characters when NODE_ENV=production|set to the provider's signing secret \\(32 characters or more\\))`),
    );
    expect(problems[0]).not.toContain(short);
    expect(() => loadConfig({ ...PRODUCTION, ...extra, [variable]: `${short}x` })).not.toThrow();
    // Outside production the lower minimums stay (so development set-ups keep working).
    expect(() => loadConfig({ ...PRODUCTION, ...extra, NODE_ENV: 'development', [variable]: short })).not.toThrow();
  });

  it('leaves the length of a webhook secret a provider issues to the provider, in production too', () => {
    expect(() => loadConfig({ ...PRODUCTION, EXTERNAL_WEBHOOK_SLACK_SCHEME: 'slack', EXTERNAL_WEBHOOK_SLACK_SECRET: 'issued-by-slack-0123' })).not.toThrow();
  });
});

describe('.env and development secrets', () => {
  let folder: string;
  beforeEach(() => {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-config-'));
  });
  afterEach(() => fs.rmSync(folder, { recursive: true, force: true }));

  it('reads .env, letting the real environment win', () => {
    const file = path.join(folder, '.env');
    fs.writeFileSync(file, 'PORT=9000\nHOST=127.0.0.1\n# a comment\nGQL_GRAPHQL_ADMIN_SECRET="quoted value"\n');
    const env = environmentWithEnvFile({ HOST: '0.0.0.0' }, file);
    expect(env).toMatchObject({ PORT: '9000', HOST: '0.0.0.0', GQL_GRAPHQL_ADMIN_SECRET: 'quoted value' });
    expect(environmentWithEnvFile({ A: '1' }, path.join(folder, 'missing.env'))).toEqual({ A: '1' });
  });

  it('generates missing secrets once in development, prints the admin secret once, and keeps both private', () => {
    const config = loadConfig({ PLINTH_DATA_DIR: folder });
    const printed: string[] = [];

    const first = withDevelopmentSecrets(config, (line) => printed.push(line));
    const second = withDevelopmentSecrets(config, (line) => printed.push(line));

    expect(first.graphql.adminSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(first.graphql.jwtSecret).toMatchObject({ type: 'HS256', key: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(second.graphql.adminSecret).toBe(first.graphql.adminSecret);
    expect(second.graphql.jwtSecret!.key).toBe(first.graphql.jwtSecret!.key);
    expect(printed).toHaveLength(1);
    expect(printed[0]).toContain(first.graphql.adminSecret);
    expect(printed.join('\n')).not.toContain(first.graphql.jwtSecret!.key);
    for (const file of ['admin-secret', 'jwt-secret']) {
      expect(fs.statSync(path.join(folder, file)).mode & 0o777).toBe(0o600);
    }
  });

  it('leaves configured secrets alone', () => {
    const config = loadConfig({
      PLINTH_DATA_DIR: folder,
      GQL_GRAPHQL_ADMIN_SECRET: 'given',
      GQL_GRAPHQL_JWT_SECRET: VALID_JWT,
      NEWSLETTER_CONFIRM_SECRET: 'c'.repeat(64),
      NEWSLETTER_UNSUBSCRIBE_SECRET: 'd'.repeat(64),
      AUTH_ENCRYPTION_KEY: 'e'.repeat(64),
    });
    expect(withDevelopmentSecrets(config, () => undefined)).toBe(config);
    expect(fs.readdirSync(folder)).toEqual([]);
  });
});

describe('payment settings', () => {
  it('has defaults: primary, the provider public address for backup, no products', () => {
    expect(loadConfig({}).payments).toMatchObject({
      initialProvider: 'primary',
      billingProviderAlias: undefined,
      adminKey: undefined,
      maxAmount: 99_999_999,
      providerTimeoutMs: 20_000,
      webhookToleranceSeconds: 300,
      licenseActivationLimit: 5,
      checkoutSuccessUrl: 'http://localhost:8080/billing/success',
      primary: { apiUrl: undefined, priceIds: {} },
      backup: { apiUrl: 'https://api.lemonsqueezy.com', variantIds: {} },
    });
  });

  it('reads one price and one variant per product, by the product in lower case', () => {
    const config = loadConfig({
      PRIMARY_PROVIDER_PRICE_ID_PRO: 'price_1Pro',
      PRIMARY_PROVIDER_PRICE_ID_TEAM_YEARLY: 'price_2Team',
      BACKUP_PROVIDER_VARIANT_ID_PRO: '777',
      PAYMENT_PROVIDER: 'backup',
      BILLING_PROVIDER: 'backup',
    });
    expect(config.payments.primary.priceIds).toEqual({ pro: 'price_1Pro', team_yearly: 'price_2Team' });
    expect(config.payments.backup.variantIds).toEqual({ pro: '777' });
    expect(config.payments).toMatchObject({ initialProvider: 'backup', billingProviderAlias: 'backup' });
  });

  it.each([
    [{ PAYMENT_PROVIDER: 'paypal' }, 'PAYMENT_PROVIDER'],
    [{ BILLING_PROVIDER: 'stripe' }, 'BILLING_PROVIDER'],
    [{ ADMIN_KEY: 'short' }, 'ADMIN_KEY'],
    [{ PRIMARY_PROVIDER_API_URL: 'not a url' }, 'PRIMARY_PROVIDER_API_URL'],
    [{ BACKUP_PROVIDER_STORE_ID: 'my-store' }, 'BACKUP_PROVIDER_STORE_ID'],
    [{ BACKUP_PROVIDER_VARIANT_ID_PRO: 'abc' }, 'BACKUP_PROVIDER_VARIANT_ID_PRO'],
    [{ PRIMARY_PROVIDER_PRICE_ID_PRO: 'price with spaces' }, 'PRIMARY_PROVIDER_PRICE_ID_PRO'],
    [{ PAYMENTS_MAX_AMOUNT: '0' }, 'PAYMENTS_MAX_AMOUNT'],
  ])('refuses %j naming the variable', (env, variable) => {
    expect(problemsOf(env as Record<string, string>).map((problem) => problem.split(' ')[0])).toEqual([variable]);
  });

  it('never repeats the admin key', () => {
    expect(problemsOf({ ADMIN_KEY: 'tiny-secret' }).join('\n')).not.toContain('tiny-secret');
  });
});

describe('the configuration reference', () => {
  const reference = configurationReference();

  it('has a row for every variable of every area, with its default and meaning', () => {
    for (const area of AREAS) {
      for (const variable of Object.keys(area.variables)) expect(reference).toMatch(new RegExp(`^\\| \`${variable}\` \\| [^|]+ \\| [^|]+ \\|$`, 'm'));
    }
    expect(reference).toContain('| `AUTH_ALLOWED_ROLES` | `user,me` |');
    expect(reference).toContain('| `PLINTH_PUBLIC_URL` | `http://localhost:<PORT>` |');
    expect(reference).toContain('| `JOBS_<QUEUE>_<SETTING>` |');
  });

  it('declares each variable in one area only, and validates the variables of every area', () => {
    const variables = AREAS.flatMap((area) => Object.keys(area.variables));
    expect(new Set(variables).size).toBe(variables.length);
    expect(Object.keys(environmentSchema.shape).sort()).toEqual(variables.sort());
  });
});
