import type { ReceivedMail, SmtpReceiver } from './smtp';
import { smtpSettings } from './smtp';

/** The newsletter's secrets in tests (32 bytes as hex each). */
export const CONFIRM_SECRET = 'c0'.repeat(32);
export const UNSUBSCRIBE_SECRET = 'a5'.repeat(32);

/** A test server's newsletter settings: mail to `smtpPort`, the series on days 1 to 4 of one second each. */
export function newsletterEnvironment(smtpPort: number, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    ...smtpSettings(smtpPort),
    AUTH_EMAIL_FROM: 'hello@plinth.test',
    AUTH_EMAIL_FROM_NAME: 'Plinth News',
    NEWSLETTER_CONFIRM_SECRET: CONFIRM_SECRET,
    NEWSLETTER_UNSUBSCRIBE_SECRET: UNSUBSCRIBE_SECRET,
    NEWSLETTER_DAY_SECONDS: '1',
    NEWSLETTER_SERIES_DAYS: '1,2,3,4',
    JOBS_POLL_INTERVAL_SECONDS: '1',
    MAIL_RETRY_DELAY_SECONDS: '1',
    // Requests carry X-Forwarded-For, so each test counts as its own client address.
    TRUST_PROXY: 'loopback',
    ...overrides,
  };
}

/** Waits for a mail to `to` whose subject matches, among everything received (in any order). */
export async function mailTo(receiver: SmtpReceiver, to: string, subject: RegExp, timeoutMs = 15_000): Promise<ReceivedMail> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = receiver.received.find((mail) => mail.recipients.includes(to) && subject.test(mail.parsed.subject ?? ''));
    if (found) return found;
    if (Date.now() > deadline) {
      const seen = receiver.received.filter((mail) => mail.recipients.includes(to)).map((mail) => mail.parsed.subject);
      throw new Error(`no mail to ${to} matching ${subject} within ${timeoutMs} ms (got: ${JSON.stringify(seen)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Every mail received for `to`, in arrival order. */
export function mailsTo(receiver: SmtpReceiver, to: string): ReceivedMail[] {
  return receiver.received.filter((mail) => mail.recipients.includes(to));
}

/** The first link of the mail's HTML part under `path`, moved to `baseUrl` (links are built on PLINTH_PUBLIC_URL). */
export function linkIn(mail: ReceivedMail, path: string, baseUrl: string): string {
  const html = typeof mail.parsed.html === 'string' ? mail.parsed.html : '';
  const match = new RegExp(`href="(https?://[^"]*${path.replace(/\//g, '\\/')}[^"]*)"`).exec(html);
  if (!match) throw new Error(`no ${path} link in the mail "${mail.parsed.subject}"`);
  const link = new URL(match[1].replace(/&amp;/g, '&'));
  return `${baseUrl}${link.pathname}${link.search}`;
}

/** A header of a received mail as it was sent (unfolded), without its name. */
export function header(mail: ReceivedMail, name: string): string | undefined {
  const line = mail.parsed.headerLines.find((entry) => entry.key === name.toLowerCase())?.line;
  return line
    ?.slice(line.indexOf(':') + 1)
    .replace(/\r?\n[ \t]+/g, ' ')
    .trim();
}

/** The variables of an issue (every one the I1 template needs). */
export const ISSUE_VARIABLES = {
  HEADLINE: 'h',
  RELEASE_HEADLINE: 'r',
  RELEASE_SUMMARY: 's',
  CLI_SNIPPET: 'c',
  CHANGELOG_URL: 'https://example.com/c',
  COMMUNITY_SHOWCASE: 'x',
  DOCS_URL: 'https://example.com/d',
  DOCS_TITLE: 't',
  DOCS_TEASER: 'y',
  ROADMAP_TEASER: 'z',
};
