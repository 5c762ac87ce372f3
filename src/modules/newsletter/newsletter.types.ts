import { DateTimeResolver } from 'graphql-scalars';
import { Field, ID, Int, ObjectType, registerEnumType } from 'type-graphql';

export enum NewsletterSubscriberStatusValue {
  PENDING = 'pending',
  ACTIVE = 'active',
  UNSUBSCRIBED = 'unsubscribed',
}

registerEnumType(NewsletterSubscriberStatusValue, {
  name: 'NewsletterSubscriberStatus',
  description: 'Where a subscriber is: waiting for confirmation, receiving the newsletter, or gone',
  valuesConfig: {
    PENDING: { description: 'Subscribed, not confirmed yet (is_verified false)' },
    ACTIVE: { description: 'Confirmed: receives the series and the issues' },
    UNSUBSCRIBED: { description: 'Unsubscribed: receives nothing' },
  },
});

@ObjectType({ description: 'A newsletter subscriber (admin only)' })
export class NewsletterSubscriber {
  @Field(() => ID)
  id!: string;

  @Field()
  email!: string;

  @Field(() => String, { nullable: true })
  name!: string | null;

  @Field(() => String, { nullable: true, description: 'Where the subscription came from' })
  source!: string | null;

  @Field({ description: 'Confirmed through the link of T1' })
  isVerified!: boolean;

  @Field(() => NewsletterSubscriberStatusValue)
  status!: NewsletterSubscriberStatusValue;

  @Field(() => DateTimeResolver, { nullable: true, description: 'When it was confirmed' })
  subscribedAt!: Date | null;

  @Field(() => DateTimeResolver, { nullable: true })
  unsubscribedAt!: Date | null;

  @Field(() => DateTimeResolver)
  createdAt!: Date;

  @Field(() => DateTimeResolver, { description: 'Deadline of the confirmation link' })
  verificationExpiresAt!: Date;
}

@ObjectType({ description: 'A page of subscribers' })
export class NewsletterSubscriberPage {
  @Field(() => Int, { description: 'Subscribers that match the filter, on every page' })
  total!: number;

  @Field(() => [NewsletterSubscriber])
  items!: NewsletterSubscriber[];
}

@ObjectType({ description: 'Subscribers in one status' })
export class NewsletterStatusCount {
  @Field(() => NewsletterSubscriberStatusValue)
  status!: NewsletterSubscriberStatusValue;

  @Field(() => Int)
  count!: number;

  @Field(() => Int, { description: 'Of them, confirmed ones' })
  verified!: number;
}

@ObjectType({ description: 'A mail of one subscriber: confirmation, series, unsubscription or an issue' })
export class NewsletterMail {
  @Field(() => ID, { description: 'The mail, or for an issue the issue' })
  id!: string;

  @Field({ description: 'T1-confirm, T2-unsub, W1-welcome to W5-cloud-preview, N1-biweekly' })
  template!: string;

  @Field({ description: 'queued (in the mail queue), scheduled, sending, sent, failed, cancelled; for issues pending, sending, sent, skipped, failed' })
  status!: string;

  @Field(() => DateTimeResolver, { description: 'When it is or was due' })
  dueAt!: Date;

  @Field(() => DateTimeResolver, { nullable: true })
  sentAt!: Date | null;

  @Field(() => Int, { nullable: true, description: 'For N1-biweekly: the issue' })
  issueNumber!: number | null;
}

@ObjectType({ description: 'A bi-weekly issue and the progress of its send' })
export class NewsletterIssue {
  @Field(() => ID)
  id!: string;

  @Field(() => Int)
  issueNumber!: number;

  @Field({ description: 'sending or sent' })
  status!: string;

  @Field(() => Int, { description: 'Verified, active subscribers when the send started' })
  recipients!: number;

  @Field(() => Int, { description: 'Not sent yet' })
  pending!: number;

  @Field(() => Int)
  sent!: number;

  @Field(() => Int, { description: 'Unsubscribed before their turn' })
  skipped!: number;

  @Field(() => Int, { description: 'Given up on after repeated delivery failures' })
  failed!: number;

  @Field({ description: 'cli, schedule or admin:<user id>' })
  requestedBy!: string;

  @Field(() => DateTimeResolver)
  createdAt!: Date;

  @Field(() => DateTimeResolver, { nullable: true })
  completedAt!: Date | null;
}

@ObjectType({ description: 'What sendNewsletterIssue did' })
export class SendNewsletterIssueResult {
  @Field({ description: 'Only counted, nothing sent' })
  dryRun!: boolean;

  @Field(() => Int, { description: 'Recipients of the issue (with dryRun, who would receive it now)' })
  recipients!: number;

  @Field({ description: 'The issue existed and was still sending: its remaining recipients were queued again' })
  resumed!: boolean;

  @Field(() => NewsletterIssue, { nullable: true, description: 'Null with dryRun' })
  issue!: NewsletterIssue | null;
}
