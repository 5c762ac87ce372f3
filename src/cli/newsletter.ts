import fs from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import pino from 'pino';
import { queueVariableName, type Config } from '../config';
import { withDevelopmentSecrets } from '../config/dev-secrets';
import { createLogger } from '../platform/logger';
import { issueLeaseSeconds } from '../modules/newsletter/issues.service';
import { newsletterJobs } from '../modules/newsletter/newsletter.jobs';
import type { IssueProgress } from '../modules/newsletter/newsletter.model';
import { newsletterFlows, type NewsletterFlows } from '../modules/newsletter/newsletter.services';
import { JobQueue } from '../platform/job-queue';
import { createMailer, mailTemplates } from '../platform/mail/mailer';
import { createOutboundHttp } from '../platform/outbound-http';
import { withDatabase } from './database';

/**
 * Runs `use` with the newsletter's services on the configured database. Jobs are only sent (the
 * server's workers run them); the mail and newsletter queues are declared so they can be.
 */
async function withNewsletter<T>(baseConfig: Config, use: (newsletter: NewsletterFlows) => Promise<T>): Promise<T> {
  const config = withDevelopmentSecrets(baseConfig, (line) => process.stderr.write(`${line}\n`));
  // Standard output is the command's answer; logs go to standard error.
  const logger = createLogger({ ...config, logLevel: 'warn' }, pino.destination(2));
  return withDatabase(config, logger, async (dataSource, endpoint) => {
    const http = createOutboundHttp(config.outboundHttp);
    const jobsConfig = { ...config.jobs };
    const queue = new JobQueue({ dataSource, url: endpoint.url, config: jobsConfig, logger, supervise: false, shutdown: new AbortController().signal });
    const mail = createMailer({ config, logger, jobs: queue, http });
    const newsletter = newsletterFlows({
      config,
      dataSource,
      mailer: mail.mailer,
      jobs: queue,
      templates: mailTemplates(config),
      logger,
      issueLeaseSeconds: issueLeaseSeconds(config.jobs),
    });
    const definitions = [...mail.jobs, ...newsletterJobs(newsletter)];
    // JOBS_<QUEUE>_* of the other modules' queues are theirs: this command declares only these.
    const declared = new Set(definitions.map((definition) => queueVariableName(definition.queue)));
    jobsConfig.queues = Object.fromEntries(Object.entries(config.jobs.queues).filter(([variable]) => declared.has(variable)));
    await queue.start();
    try {
      await queue.declare(definitions);
      return await use(newsletter);
    } finally {
      await queue.stop();
      mail.close();
      await http.close();
    }
  });
}

function issueNumber(value: string): number {
  if (!/^\d{1,7}$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('must be a whole number from 1');
  return Number(value);
}

function readVariables(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`--vars ${file}: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`--vars ${file}: must be a JSON object`);
  return parsed as Record<string, unknown>;
}

function describeIssue(issue: IssueProgress): string {
  return `issue ${issue.issue_number}: ${issue.status}, ${issue.recipients} recipients (${issue.sent} sent, ${issue.pending} to go, ${issue.skipped} skipped, ${issue.failed} failed)`;
}

/** `plinth newsletter send-issue|send-series|cleanup|issues`: the same service as the admin GraphQL API. */
export function newsletterCommand(configuration: () => Config): Command {
  const newsletter = new Command('newsletter').description('send the bi-weekly issue, send series mails by hand, clean up (as the admin GraphQL API does)');

  newsletter
    .command('send-issue')
    .description('send issue <N> (template N1-biweekly) to every verified, active subscriber through the queue; again for an issue still sending, resume it')
    .requiredOption('--issue <N>', 'the issue number', issueNumber)
    .requiredOption('--vars <file>', 'JSON object with the N1 variables (HEADLINE, RELEASE_HEADLINE, ...)')
    .option('--dry-run', 'only report how many subscribers would receive it')
    .option('--json', 'print the outcome as JSON')
    .action(async (options: { issue: number; vars: string; dryRun?: boolean; json?: boolean }) => {
      const variables = readVariables(options.vars);
      const result = await withNewsletter(configuration(), ({ issues }) =>
        issues.sendIssue({ issueNumber: options.issue, variables, dryRun: options.dryRun ?? false, requestedBy: 'cli' }),
      );
      if (options.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      else if (result.dryRun) process.stdout.write(`dry run: issue ${options.issue} would go to ${result.recipients} subscribers\n`);
      else process.stdout.write(`${result.resumed ? 'resumed' : 'queued'} ${describeIssue(result.issue)}\n`);
      process.exit(0);
    });

  newsletter
    .command('send-series')
    .description('send one welcome-series mail (W1-welcome to W5-cloud-preview) to one active subscriber now')
    .requiredOption('--email <address>', 'the subscriber')
    .requiredOption('--template <name>', 'W1-welcome, W2-first-plugin, W3-case-study, W4-nclaw or W5-cloud-preview')
    .action(async (options: { email: string; template: string }) => {
      const mail = await withNewsletter(configuration(), ({ series }) => series.sendSeriesMailByHand(options.email, options.template));
      process.stdout.write(`${mail.template} queued for ${options.email.trim().toLowerCase()} (mail ${mail.id})\n`);
      process.exit(0);
    });

  newsletter
    .command('cleanup')
    .description('delete unconfirmed subscribers whose link expired and that are older than NEWSLETTER_CLEANUP_AFTER_DAYS, now')
    .option('--json', 'print {"deleted": N}')
    .action(async (options: { json?: boolean }) => {
      const deleted = await withNewsletter(configuration(), ({ subscriptions }) => subscriptions.cleanup());
      process.stdout.write(options.json ? `${JSON.stringify({ deleted })}\n` : `deleted ${deleted} unconfirmed subscriber${deleted === 1 ? '' : 's'}\n`);
      process.exit(0);
    });

  newsletter
    .command('issues')
    .description('list the issues and the progress of their sends, newest first')
    .option('--json', 'print them as JSON')
    .action(async (options: { json?: boolean }) => {
      const issues = await withNewsletter(configuration(), ({ admin }) => admin.issues({ first: 100 }));
      process.stdout.write(options.json ? `${JSON.stringify(issues, null, 2)}\n` : `${issues.map(describeIssue).join('\n') || 'no issues yet'}\n`);
      process.exit(0);
    });

  return newsletter;
}
