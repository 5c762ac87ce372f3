import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/config';
import { withDevelopmentSecrets } from '../../src/config/dev-secrets';
import { ADMIN_SECRET, PRODUCTION } from '../support/server';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('the configuration was accepted');
}

describe('newsletter and mail-delivery settings', () => {
  it('have the defaults of spec 3 §8', () => {
    const config = loadConfig({});
    expect(config.newsletter).toEqual({
      confirmSecret: undefined,
      unsubscribeSecret: undefined,
      confirmTtlSeconds: 48 * 3600,
      confirmResendLimit: 3,
      subscribeRateLimit: { points: 3, durationSeconds: 3600 },
      daySeconds: 86_400,
      seriesDays: [3, 7, 14, 21],
      cleanupAfterDays: 7,
      issueIntervalDays: 14,
      issueScheduleVarsFile: undefined,
      schedulerIntervalSeconds: 60,
      sendBatchSize: 200,
      sendConcurrency: 20,
      from: { address: 'noreply@localhost', name: 'Plinth' },
      listId: undefined,
      licenseAlertDays: 7,
      licenseManageUrl: 'http://localhost:8080/account/licenses',
    });
    expect(config.mail.api).toBeUndefined();
  });

  it('read the license notice settings, and refuse bad ones naming the variable', () => {
    const config = loadConfig({
      NEWSLETTER_LICENSE_ALERT_DAYS: '3',
      NEWSLETTER_LICENSE_MANAGE_URL: 'https://billing.example.com/portal',
      PLINTH_PUBLIC_URL: 'https://example.com',
    });
    expect(config.newsletter).toMatchObject({ licenseAlertDays: 3, licenseManageUrl: 'https://billing.example.com/portal' });
    expect(loadConfig({ PLINTH_PUBLIC_URL: 'https://api.example.com' }).newsletter.licenseManageUrl).toBe('https://api.example.com/account/licenses');
    const problems = problemsOf({ NEWSLETTER_LICENSE_ALERT_DAYS: '0', NEWSLETTER_LICENSE_MANAGE_URL: 'javascript:alert(1)' });
    expect(problems.map((problem) => problem.split(' ')[0]).sort()).toEqual(['NEWSLETTER_LICENSE_ALERT_DAYS', 'NEWSLETTER_LICENSE_MANAGE_URL']);
  });

  it('read the delivery API, the sender and the list', () => {
    const config = loadConfig({
      EMAIL_DELIVERY_API_KEY: 're_test_key',
      EMAIL_DELIVERY_FROM: 'news@example.com',
      EMAIL_DELIVERY_LIST_ID_NEWSLETTER: 'aud_123',
      NEWSLETTER_CONFIRM_SECRET: 'AB'.repeat(32),
      NEWSLETTER_SERIES_DAYS: '1, 2,3 ,4',
    });
    expect(config.mail.api).toEqual({ url: 'https://api.resend.com', key: 're_test_key' });
    expect(config.newsletter).toMatchObject({
      from: { address: 'news@example.com', name: 'Plinth' },
      listId: 'aud_123',
      confirmSecret: 'ab'.repeat(32),
      seriesDays: [1, 2, 3, 4],
    });
  });

  it('refuse bad values, naming the variable and never repeating a secret', () => {
    const problems = problemsOf({
      NEWSLETTER_CONFIRM_SECRET: 'not-hex-secret',
      NEWSLETTER_UNSUBSCRIBE_SECRET: 'ab'.repeat(31),
      NEWSLETTER_SERIES_DAYS: '3,7,7,21',
      NEWSLETTER_CONFIRM_TTL_SECONDS: '10',
      EMAIL_DELIVERY_API_URL: 'ftp://mail.example.com',
      EMAIL_DELIVERY_FROM: 'Plinth <news@example.com>',
      EMAIL_DELIVERY_LIST_ID_NEWSLETTER: 'has space',
    });
    expect(problems.map((problem) => problem.split(' ')[0]).sort()).toEqual([
      'EMAIL_DELIVERY_API_URL',
      'EMAIL_DELIVERY_FROM',
      'EMAIL_DELIVERY_LIST_ID_NEWSLETTER',
      'NEWSLETTER_CONFIRM_SECRET',
      'NEWSLETTER_CONFIRM_TTL_SECONDS',
      'NEWSLETTER_SERIES_DAYS',
      'NEWSLETTER_UNSUBSCRIBE_SECRET',
    ]);
    expect(problems.join('\n')).not.toContain('not-hex-secret');
  });

  it('let production run on the delivery API without SMTP', () => {
    expect(() =>
      loadConfig({
        ...PRODUCTION,
        GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
        GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'k'.repeat(32) }),
        EMAIL_DELIVERY_API_KEY: 'k',
      }),
    ).not.toThrow();
  });

  it('generate the two newsletter secrets once outside production, never in production', () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-newsletter-config-'));
    try {
      const config = loadConfig({
        PLINTH_DATA_DIR: folder,
        GQL_GRAPHQL_ADMIN_SECRET: 'given',
        GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'k'.repeat(32) }),
      });
      const first = withDevelopmentSecrets(config, () => undefined);
      const second = withDevelopmentSecrets(config, () => undefined);
      expect(first.newsletter.confirmSecret).toMatch(/^[0-9a-f]{64}$/);
      expect(first.newsletter.unsubscribeSecret).toMatch(/^[0-9a-f]{64}$/);
      expect(first.newsletter.unsubscribeSecret).not.toBe(first.newsletter.confirmSecret);
      expect(second.newsletter).toEqual(first.newsletter);
      expect(fs.statSync(path.join(folder, 'newsletter-confirm-secret')).mode & 0o777).toBe(0o600);
      const production = { ...config, env: 'production' as const };
      expect(withDevelopmentSecrets(production, () => undefined).newsletter.confirmSecret).toBeUndefined();
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});
