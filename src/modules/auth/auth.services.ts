import { PasswordHasher } from '../../common/passwords';
import { ConfigError, type Config, type JwtSecretConfig } from '../../config';
import type { SessionSettings } from '../../platform/session';
import { mailDeliveryProblem } from '../../platform/mail/transport';
import type { Platform } from '../../platform/module';
import type { RateLimits } from '../../platform/rate-limits';
import { AccountMail } from './account-mail.service';
import { AccountTakeover } from './account-takeover.service';
import { AnonymousUsers } from './anonymous-users.service';
import { AuthService } from './auth.service';
import { BreachedPasswords } from './breached-passwords.service';
import { CustomClaims } from './custom-claims.service';
import { EmailSignIn } from './email-sign-in.service';
import { LinkVerification } from './link-verification.service';
import { NewAccounts } from './new-accounts.service';
import { OAuthSignIn } from './oauth.service';
import { RedirectPolicy } from './redirects';
import { SessionTokens } from './session-tokens.service';
import { SignIn } from './sign-in.service';
import { SignUpPolicy } from './sign-up-policy.service';
import { SmsFactor } from './sms.service';
import { Tickets } from './tickets.service';
import { TotpFactor } from './totp.service';
import { UserAccount } from './user-account.service';
import { UserAdministration } from './user-administration.service';

export interface AuthServices {
  auth: AuthService;
  /** Sign-up and sign-in with an e-mail address: a password, or a mailed link. */
  emailSignIn: EmailSignIn;
  /** Anonymous users (AUTH_ANONYMOUS_USERS_ENABLED) and their upgrade to an e-mail account. */
  anonymous: AnonymousUsers;
  /** The mailed links, followed (GET /auth/verify, invitations), and a verification link sent again. */
  links: LinkVerification;
  /** The user's own account: read, its password reset or changed, its address changed. */
  account: UserAccount;
  /** What every path that makes an account from outside follows (registerUser too). */
  signUps: SignUpPolicy;
  tokens: SessionTokens;
  /** Single-use tickets: the second-factor issue redeems the `mfaTotp`/`mfaSms` ones sign-in issues. */
  tickets: Tickets;
  /** The TOTP second factor (AUTH_MFA_TOTP_ENABLED). */
  totp: TotpFactor;
  /** The SMS second factor (AUTH_MFA_SMS_ENABLED). */
  sms: SmsFactor;
  /** Sign-in with external identity providers (AUTH_PROVIDER_<NAME>_ENABLED). */
  oauth: OAuthSignIn;
  /** The operator commands' (plinth auth user ...). */
  admin: UserAdministration;
  /** How the auth routes read a bearer token: the signing secret verifies it. */
  bearer: SessionSettings;
  rateLimits: RateLimits;
  /** AUTH_PORT: the auth routes also listen on 127.0.0.1 at this port. */
  port: number | undefined;
  /** AUTH_CLEANUP_INTERVAL_SECONDS: expired refresh tokens and tickets are deleted this often. */
  cleanupIntervalSeconds: number;
}

/**
 * The signing secret: AUTH_JWT_SECRET's key (and namespace, when it names one) over the engine's
 * GQL_GRAPHQL_JWT_SECRET, so that one secret serves both sides by default. The auth service
 * signs, so the algorithm must be an HMAC one.
 */
export function signingSecret(config: Config): JwtSecretConfig {
  const engine = config.graphql.jwtSecret!;
  const own = config.auth.jwtSecret;
  const secret: JwtSecretConfig = own
    ? {
        ...engine,
        type: own.type ?? (engine.type.startsWith('HS') ? engine.type : 'HS256'),
        key: own.key,
        ...(own.claims_namespace ? { claims_namespace: own.claims_namespace } : {}),
      }
    : engine;
  if (!secret.type.startsWith('HS')) {
    throw new ConfigError([`AUTH_JWT_SECRET is required when GQL_GRAPHQL_JWT_SECRET is ${secret.type}: the auth service signs with a shared secret`]);
  }
  return secret;
}

/** What the auth services are built from: the platform's parts (the CLI gives the same). */
export type AuthPlatform = Pick<Platform, 'config' | 'dataSource' | 'http' | 'mailer' | 'logger' | 'rateLimits'>;

export function createAuthServices({ config, dataSource, http, mailer, logger, rateLimits }: AuthPlatform): AuthServices {
  const log = logger.child({ module: 'auth' });
  // Passwordless sign-in is nothing but mail: without delivery the server does not start. The
  // other routes that mail answer disabled-endpoint instead (a production server may run
  // without SMTP_HOST when it does not verify addresses).
  if (config.auth.passwordlessEmailEnabled) mailer.requireDelivery('AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED');
  const canMail = mailDeliveryProblem(config) === undefined;
  // Outside production start-up generates the key (dev-secrets.ts); a test or a bare config must set it.
  if (config.auth.mfa.totpEnabled && !config.auth.mfa.encryptionKey) {
    throw new ConfigError(['AUTH_ENCRYPTION_KEY is required when AUTH_MFA_TOTP_ENABLED=true (it encrypts the TOTP secrets)']);
  }
  const secret = signingSecret(config);
  const tokens = new SessionTokens(
    dataSource,
    {
      secret,
      accessTokenExpiresInSeconds: config.auth.accessTokenExpiresInSeconds,
      refreshTokenExpiresInMinutes: config.auth.refreshTokenExpiresInMinutes,
      reuseGraceSeconds: config.auth.refreshTokenReuseGraceSeconds,
      recentSignInSeconds: config.auth.recentSignInSeconds,
      mfaRequiredRoles: config.auth.mfa.requiredRoles,
    },
    new CustomClaims(http, config.auth.customClaimsWebhook, log),
    log,
  );
  const tickets = new Tickets();
  const signUps = new SignUpPolicy(config.auth, new BreachedPasswords(http, config.auth.hibp, log));
  const sms = new SmsFactor(dataSource, tokens, tickets, rateLimits, http, config.auth.mfa, log);
  const redirects = new RedirectPolicy(config.auth.allowedRedirectUrls, config.auth.clientUrl);
  const passwords = new PasswordHasher(config.auth.passwordHash);
  const mail = new AccountMail(tickets, mailer, config, canMail);
  const newAccounts = new NewAccounts(config.auth, signUps);
  const takeover = new AccountTakeover(log);
  const signIn = new SignIn(dataSource, tokens, tickets, sms, config.auth);
  return {
    sms,
    auth: new AuthService(),
    emailSignIn: new EmailSignIn(dataSource, tokens, signUps, newAccounts, signIn, mail, passwords, redirects, config.auth),
    anonymous: new AnonymousUsers(dataSource, tokens, signUps, newAccounts, mail, passwords, redirects, config.auth),
    links: new LinkVerification(dataSource, tickets, takeover, signIn, mail, redirects, config.auth),
    account: new UserAccount(dataSource, tokens, tickets, signUps, takeover, mail, passwords, redirects),
    signUps,
    oauth: new OAuthSignIn(dataSource, signIn, newAccounts, takeover, redirects, http, config, secret.key, log),
    tokens,
    tickets,
    totp: new TotpFactor(dataSource, tokens, tickets, rateLimits, config.auth.mfa, log),
    admin: new UserAdministration(dataSource, tokens),
    bearer: { adminSecret: config.graphql.adminSecret!, jwtSecret: secret, unauthorizedRole: config.graphql.unauthorizedRole },
    rateLimits,
    port: config.auth.port,
    cleanupIntervalSeconds: config.auth.cleanupIntervalSeconds,
  };
}
