import { JSONObjectResolver } from 'graphql-scalars';
import { Arg, Authorized, Ctx, Int, Mutation, Query, Resolver } from 'type-graphql';
import { Refusal } from '../../common/refusal';
import type { GraphQLContext } from '../../graphql/context';
import { ADMIN_ROLE } from '../../common/roles';
import { MAX_PAGE, type IssueProgress, type Subscriber, type SubscriberMail } from './newsletter.model';
import type { NewsletterServices } from './newsletter.services';
import {
  NewsletterIssue,
  NewsletterMail,
  NewsletterStatusCount,
  NewsletterSubscriber,
  NewsletterSubscriberPage,
  NewsletterSubscriberStatusValue,
  SendNewsletterIssueResult,
} from './newsletter.types';

/** The newsletter's admin API: subscribers, their mails, issues and their progress. */
@Resolver()
export class NewsletterResolver {
  constructor(private readonly services: NewsletterServices) {}

  @Authorized(ADMIN_ROLE)
  @Query(() => NewsletterSubscriberPage, { description: 'Subscribers, newest first, with filters' })
  async newsletterSubscribers(
    @Arg('status', () => NewsletterSubscriberStatusValue, { nullable: true }) status: NewsletterSubscriberStatusValue | null,
    @Arg('verified', () => Boolean, { nullable: true }) verified: boolean | null,
    @Arg('search', () => String, { nullable: true, description: 'Part of the address' }) search: string | null,
    @Arg('first', () => Int, { nullable: true, defaultValue: 50, description: `1 to ${MAX_PAGE}` }) first: number | null,
    @Arg('offset', () => Int, { nullable: true, defaultValue: 0 }) offset: number | null,
  ): Promise<NewsletterSubscriberPage> {
    const page = await this.services.admin.subscribers({ status, verified, search, first, offset });
    return { total: page.total, items: page.items.map(toSubscriber) };
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [NewsletterStatusCount], { description: 'Subscribers per status (every status)' })
  async newsletterSubscriberCounts(): Promise<NewsletterStatusCount[]> {
    return (await this.services.admin.counts()).map((row) => ({ ...row, status: row.status as NewsletterSubscriberStatusValue }));
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => NewsletterSubscriber, { nullable: true, description: 'The subscriber with this address, or null' })
  async newsletterSubscriber(@Arg('email', () => String) email: string): Promise<NewsletterSubscriber | null> {
    const subscriber = await this.services.admin.subscriber(email);
    return subscriber && toSubscriber(subscriber);
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [NewsletterMail], { description: "One subscriber's mails, newest first (NOT_FOUND for an unknown address)" })
  async newsletterSubscriberMails(@Arg('email', () => String) email: string): Promise<NewsletterMail[]> {
    const subscriber = await this.services.admin.subscriber(email);
    if (!subscriber) throw new Refusal('NOT_FOUND', 'no subscriber has this address', 404);
    return (await this.services.admin.mailsOf(subscriber.id)).map(toMail);
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [NewsletterIssue], { description: 'Issues with the progress of their send, newest first' })
  async newsletterIssues(
    @Arg('first', () => Int, { nullable: true, defaultValue: 20, description: `1 to ${MAX_PAGE}` }) first: number | null,
  ): Promise<NewsletterIssue[]> {
    return (await this.services.admin.issues({ first })).map(toIssue);
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => SendNewsletterIssueResult, {
    description:
      'Sends issue N (template N1-biweekly) to every verified, active subscriber through the queue; dryRun only counts them. Asking again for an issue still sending resumes it.',
  })
  async sendNewsletterIssue(
    @Arg('issueNumber', () => Int) issueNumber: number,
    @Arg('variables', () => JSONObjectResolver, { description: 'The N1 variables: HEADLINE, RELEASE_HEADLINE, ... (ISSUE_NUMBER may be left out)' })
    variables: Record<string, unknown>,
    @Arg('dryRun', () => Boolean, { nullable: true, defaultValue: false }) dryRun: boolean | null,
    @Ctx() context: GraphQLContext,
  ): Promise<SendNewsletterIssueResult> {
    const result = await this.services.issues.sendIssue({
      issueNumber,
      variables,
      dryRun: dryRun ?? false,
      requestedBy: `admin:${context.session.userId ?? 'admin-secret'}`,
    });
    return result.dryRun
      ? { dryRun: true, recipients: result.recipients, resumed: false, issue: null }
      : { dryRun: false, recipients: result.issue.recipients, resumed: result.resumed, issue: toIssue(result.issue) };
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => NewsletterMail, { description: 'Sends one of the welcome series (W1-welcome to W5-cloud-preview) to one active subscriber now' })
  async sendNewsletterSeriesMail(@Arg('email', () => String) email: string, @Arg('template', () => String) template: string): Promise<NewsletterMail> {
    return toMail(await this.services.series.sendSeriesMailByHand(email, template));
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => Int, { description: 'Deletes unconfirmed subscribers whose link expired and that are older than 7 days now; the count' })
  runNewsletterCleanup(): Promise<number> {
    return this.services.subscriptions.cleanup();
  }
}

function toSubscriber(row: Subscriber): NewsletterSubscriber {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    source: row.source,
    isVerified: row.is_verified,
    status: row.status as NewsletterSubscriberStatusValue,
    subscribedAt: row.subscribed_at,
    unsubscribedAt: row.unsubscribed_at,
    createdAt: row.created_at,
    verificationExpiresAt: row.verification_expires_at,
  };
}

function toMail(row: SubscriberMail): NewsletterMail {
  return { id: row.id, template: row.template, status: row.status, dueAt: row.due_at, sentAt: row.sent_at, issueNumber: row.issue_number };
}

export function toIssue(row: IssueProgress): NewsletterIssue {
  return {
    id: row.id,
    issueNumber: row.issue_number,
    status: row.status,
    recipients: row.recipients,
    pending: row.pending,
    sent: row.sent,
    skipped: row.skipped,
    failed: row.failed,
    requestedBy: row.requested_by,
    createdAt: row.created_at,
    completedAt: row.completed_at,
  };
}
