import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './index';
import { jwtSecretSchema } from './jwt-secret';

/**
 * Outside production a missing admin secret or JWT secret is generated once, kept under the
 * data folder (mode 0600) so it survives restarts, and the admin secret is printed the one
 * time it is created. loadConfig already refused to run without them in production.
 */
export function withDevelopmentSecrets(config: Config, print: (line: string) => void): Config {
  return withAuthEncryptionKey(withNewsletterSecrets(withApiSecrets(config, print)));
}

function withApiSecrets(config: Config, print: (line: string) => void): Config {
  if (config.graphql.adminSecret && config.graphql.jwtSecret) return config;
  fs.mkdirSync(config.database.dataDir, { recursive: true });
  const adminSecret =
    config.graphql.adminSecret ??
    readOrCreate(path.join(config.database.dataDir, 'admin-secret'), (secret, file) =>
      print(`GQL_GRAPHQL_ADMIN_SECRET was not set; generated one for development (kept in ${file}):\n  ${secret}`),
    );
  // Through the same schema as GQL_GRAPHQL_JWT_SECRET, so the defaults are the configured ones.
  const jwtSecret =
    config.graphql.jwtSecret ??
    jwtSecretSchema.parse(JSON.stringify({ type: 'HS256', key: readOrCreate(path.join(config.database.dataDir, 'jwt-secret'), () => undefined) }));
  return { ...config, graphql: { ...config.graphql, adminSecret, jwtSecret } };
}

/**
 * The newsletter's two HMAC secrets, likewise generated and kept outside production, so that
 * links in mails sent before a restart still work. In production they must be set (the
 * newsletter answers 503 without them).
 */
function withNewsletterSecrets(config: Config): Config {
  const { newsletter } = config;
  if (config.env === 'production' || (newsletter.confirmSecret && newsletter.unsubscribeSecret)) return config;
  fs.mkdirSync(config.database.dataDir, { recursive: true });
  const keep = (name: string) => readOrCreate(path.join(config.database.dataDir, name), () => undefined, /^[0-9a-f]{64}$/);
  return {
    ...config,
    newsletter: {
      ...newsletter,
      confirmSecret: newsletter.confirmSecret ?? keep('newsletter-confirm-secret'),
      unsubscribeSecret: newsletter.unsubscribeSecret ?? keep('newsletter-unsubscribe-secret'),
    },
  };
}

/**
 * AUTH_ENCRYPTION_KEY, which encrypts TOTP secrets: kept like the others outside production, so
 * that enrolled authenticators still work after a restart. Production refuses TOTP without it.
 */
function withAuthEncryptionKey(config: Config): Config {
  const { mfa } = config.auth;
  if (config.env === 'production' || mfa.encryptionKey) return config;
  const encryptionKey = developmentEncryptionKey(config.database.dataDir);
  return { ...config, auth: { ...config.auth, mfa: { ...mfa, encryptionKey } } };
}

/** The AUTH_ENCRYPTION_KEY kept under the data folder (created the first time). */
export function developmentEncryptionKey(dataDir: string): string {
  fs.mkdirSync(dataDir, { recursive: true });
  return readOrCreate(path.join(dataDir, 'auth-encryption-key'), () => undefined, /^[0-9a-f]{64}$/);
}

function readOrCreate(file: string, onCreate: (secret: string, file: string) => void, format = /^.{32,}$/): string {
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    if (format.test(existing)) return existing;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const secret = randomBytes(32).toString('hex');
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  onCreate(secret, file);
  return secret;
}
