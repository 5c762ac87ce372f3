import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { loadConfig } from '../../src/config';
import { mailTemplates } from '../../src/platform/mail/mailer';
import { BUILT_IN_TEMPLATES_DIR, MailError, type MailTemplates, type MailVariables } from '../../src/platform/mail/templates';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium, recordRequests, saveScreenshot } from '../support/browser';
import { runCli } from '../support/spawn';

/** The nine templates of spec 3 §2.4, with what each must say. */
const TEMPLATES: Record<string, { subject: RegExp; says: string[] }> = {
  'T1-confirm': { subject: /^Confirm your subscription to the Plinth newsletter$/, says: ['Confirm my subscription', 'valid for 48 hours'] },
  'T2-unsub': { subject: /^You are unsubscribed/, says: ['This is the last one'] },
  'T3-license-alert': {
    subject: /^Your Plinth Pro license renews on 1 March 2026$/,
    says: ['renews on <strong>1 March 2026</strong>', 'Manage my license', 'holds a Plinth Pro license'],
  },
  'W1-welcome': { subject: /^Welcome to the Plinth newsletter$/, says: ['Read the docs'] },
  'W2-first-plugin': { subject: /^Install your first plugin$/, says: ['plinth plugins install'] },
  'W3-case-study': { subject: /^How a small team/, says: ['Read the case study'] },
  'W4-nclaw': { subject: /^Meet nClaw$/, says: ['Try nClaw'] },
  'W5-cloud-preview': { subject: /^A preview of the cloud$/, says: ['Join the preview', 'last mail of the welcome series'] },
  'N1-biweekly': {
    subject: /^#42: Faster jobs, one-click unsubscribe$/,
    says: ['Plinth 1.4 is out', 'plinth migrate &amp;&amp; plinth start', 'From the community', 'Background jobs in depth', 'Next: scheduled reports'],
  },
};

const sample = (name: string): MailVariables => JSON.parse(fs.readFileSync(path.join(BUILT_IN_TEMPLATES_DIR, 'samples', `${name}.json`), 'utf8'));

let templates: MailTemplates;
beforeAll(() => {
  templates = mailTemplates(loadConfig({ PLINTH_DATA_DIR: os.tmpdir() }));
});

describe('the newsletter templates', () => {
  it.each(Object.entries(TEMPLATES))('%s renders from its sample, with HTML and text parts and the unsubscribe link', async (name, expected) => {
    const mail = await templates.render(name, sample(name));
    expect(mail.subject).toMatch(expected.subject);
    for (const text of expected.says) expect(mail.html).toContain(text);
    const unsubscribe = String(sample(name).unsubscribe_url);
    expect(mail.html).toContain(`href="${unsubscribe.replace(/&/g, '&amp;')}"`);
    expect(mail.text).toContain(unsubscribe);
    expect(mail.text).not.toMatch(/<\/?(div|p|a|table|td|span|br|pre)\b/i);
  });

  it('checks the variables: each missing one is named, and values are escaped in the HTML', async () => {
    const { HEADLINE: _headline, DOCS_URL: _docs, ...missing } = sample('N1-biweekly');
    await expect(templates.render('N1-biweekly', missing)).rejects.toThrow(MailError);
    await expect(templates.render('N1-biweekly', missing)).rejects.toThrow(/needs variables "HEADLINE", "DOCS_URL"/);
    const hostile = await templates.render('N1-biweekly', { ...sample('N1-biweekly'), COMMUNITY_SHOWCASE: '<script>alert(1)</script>' });
    expect(hostile.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(hostile.html).not.toContain('<script>alert');
    expect(hostile.text).toContain('<script>alert(1)</script>');
  });

  it('plinth mail render shows each with its sample data', async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-render-'));
    const result = await runCli(['mail', 'render', 'N1-biweekly', '--sample', '--out', path.join(folder, 'n1.html')], { PLINTH_DATA_DIR: folder }, folder);
    expect(result).toMatchObject({ code: 0, stdout: expect.stringContaining('Subject: #42: Faster jobs, one-click unsubscribe') });
    expect(fs.readFileSync(path.join(folder, 'n1.html'), 'utf8')).toContain('Plinth 1.4 is out');
    const unknown = await runCli(['mail', 'render', '../etc', '--sample', '--out', path.join(folder, 'x.html')], { PLINTH_DATA_DIR: folder }, folder);
    expect(unknown).toMatchObject({ code: 1, stderr: 'plinth: there are no sample variables for "../etc"\n' });
  });

  describe('in a real browser', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    }, BROWSER_SETUP_TIMEOUT_MS);
    afterAll(async () => {
      await browser?.close();
    });

    it('render all nine as pages that load nothing from elsewhere (screenshots in test-artifacts/newsletter/)', async () => {
      const page = await browser.newPage({ viewport: { width: 680, height: 900 } });
      const requests = recordRequests(page);
      for (const name of Object.keys(TEMPLATES)) {
        const mail = await templates.render(name, sample(name));
        await page.setContent(mail.html, { waitUntil: 'load' });
        expect(await page.title()).toBe(mail.subject);
        // The content column is the 600 px MJML lays out, with the unsubscribe link visible at the bottom.
        const link = page.locator(`a[href="${String(sample(name).unsubscribe_url)}"]`).last();
        expect(await link.isVisible()).toBe(true);
        const file = await saveScreenshot(page, 'newsletter', name);
        expect(fs.statSync(file).size).toBeGreaterThan(10_000);
      }
      expect(requests.filter((url) => !url.startsWith('about:') && !url.startsWith('data:'))).toEqual([]);
      await page.close();
    });
  });
});
