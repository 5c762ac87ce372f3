import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Config } from '../config';
import { createLogger } from '../platform/logger';
import { createMailDelivery, mailTemplates, type MailVariables } from '../platform/mail/mailer';
import { BUILT_IN_TEMPLATES_DIR } from '../platform/mail/templates';
import { createOutboundHttp } from '../platform/outbound-http';

/** `plinth mail ...`: look at a mail before anyone receives it, and check that mail goes out. */
export function registerMailCommands(program: Command, configuration: () => Config): void {
  const mail = program.command('mail').description('render mail templates and check mail delivery');

  mail
    .command('send-test')
    .description('send the "test" template to <address> at once, not through the queue (SMTP, or an .eml file without SMTP_HOST)')
    .argument('<address>', 'recipient')
    .action(async (address: string) => {
      const config = configuration();
      // The outcome is printed below; log lines would only repeat it.
      const http = createOutboundHttp(config.outboundHttp);
      const delivery = createMailDelivery(config, createLogger({ ...config, logLevel: 'warn' }), http);
      try {
        const sent = await delivery.deliver({ to: address, template: 'test' });
        process.stdout.write(
          sent.file
            ? `test mail to ${address} written to ${sent.file} (SMTP_HOST is unset)\n`
            : `test mail sent to ${address} through ${delivery.destination} (message id ${sent.messageId})\n`,
        );
      } catch (error) {
        throw new Error(`the test mail to ${address} was not sent through ${delivery.destination}: ${(error as Error).message}`);
      } finally {
        // The SMTP pool would otherwise keep the process alive.
        delivery.close();
        await http.close();
      }
    });

  mail
    .command('render')
    .description('render a template to an HTML file, and print its subject and text part')
    .argument('<template>', 'template name, e.g. verify-email (AUTH_EMAIL_TEMPLATES_DIR first, then the built-in ones)')
    .option('--vars <file>', 'JSON object with the template variables')
    .option('--sample', 'use the sample variables shipped with a built-in template (templates/samples/<template>.json)')
    .requiredOption('--out <file>', 'where to write the HTML part')
    .action(async (template: string, options: { vars?: string; sample?: boolean; out: string }) => {
      const config = configuration();
      if (options.sample && options.vars) throw new Error('give --vars or --sample, not both');
      const file = options.sample ? sampleVariablesFile(template) : options.vars;
      const rendered = await mailTemplates(config).render(template, file ? readVariables(file) : {});
      fs.writeFileSync(options.out, rendered.html);
      process.stdout.write(`Subject: ${rendered.subject}\nHTML part: ${options.out}\n\n${rendered.text}\n`);
    });
}

/** The sample variables of a built-in template; the name is checked before it becomes a path. */
function sampleVariablesFile(template: string): string {
  const file = /^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(template) ? path.join(BUILT_IN_TEMPLATES_DIR, 'samples', `${template}.json`) : '';
  if (!file || !fs.existsSync(file)) throw new Error(`there are no sample variables for "${template}"`);
  return file;
}

function readVariables(file: string): MailVariables {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`--vars ${file}: ${(error as Error).message}`);
  }
  const valid =
    typeof parsed === 'object' &&
    parsed !== null &&
    !Array.isArray(parsed) &&
    Object.values(parsed).every((value) => typeof value === 'string' || typeof value === 'number');
  if (!valid) throw new Error(`--vars ${file}: must be a JSON object whose values are strings or numbers`);
  return parsed as MailVariables;
}
