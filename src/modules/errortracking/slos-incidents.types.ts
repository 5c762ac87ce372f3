import { DateTimeResolver } from 'graphql-scalars';
import { Field, Float, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { PageInfo } from '../../common/page-info.types';

export enum SloStatusValue {
  ON_TRACK = 'ON_TRACK',
  AT_RISK = 'AT_RISK',
  BREACHED = 'BREACHED',
}
registerEnumType(SloStatusValue, {
  name: 'SloStatus',
  description:
    'BREACHED once the error budget is spent; AT_RISK while a burn-rate alert fires or less than errorBudgetAlertThreshold of it remains; ON_TRACK otherwise',
});

@ObjectType({ description: 'A service level objective over the good and bad events of a service' })
export class SloNode {
  @Field(() => ID)
  id!: string;

  @Field()
  name!: string;

  @Field()
  service!: string;

  @Field(() => Float, { description: 'The share of good events aimed at, in percent (99.9)' })
  targetPercentage!: number;

  @Field(() => Int, { description: 'The window the budget is measured over (30 days by default)' })
  windowDays!: number;

  @Field(() => Float, { description: 'AT_RISK below this fraction of the budget (0.25 by default)' })
  errorBudgetAlertThreshold!: number;

  @Field(() => Int)
  projectId!: number;
}

@ObjectType()
export class SloEdge {
  @Field(() => SloNode)
  node!: SloNode;

  @Field()
  cursor!: string;
}

@ObjectType()
export class SloConnection {
  @Field(() => [SloEdge])
  edges!: SloEdge[];

  @Field(() => PageInfo)
  pageInfo!: PageInfo;
}

@InputType()
export class CreateSloInput {
  @Field({ description: 'The project’s id or slug (a secret key: its own project)' })
  project!: string;

  @Field()
  name!: string;

  @Field(() => String, { nullable: true, description: 'The project’s service unless given' })
  service?: string | null;

  @Field(() => Float, { description: 'Above 0 and below 100' })
  targetPercentage!: number;

  @Field(() => Int, { nullable: true, description: '1 to 90; 30 by default' })
  windowDays?: number | null;

  @Field(() => Float, { nullable: true, description: '0 to 1; 0.25 by default' })
  errorBudgetAlertThreshold?: number | null;
}

@InputType()
export class UpdateSloInput {
  @Field(() => String, { nullable: true })
  name?: string | null;

  @Field(() => Float, { nullable: true })
  targetPercentage?: number | null;

  @Field(() => Float, { nullable: true })
  errorBudgetAlertThreshold?: number | null;
}

export enum IncidentStatusValue {
  TRIGGERED = 'triggered',
  ACKNOWLEDGED = 'acknowledged',
  RESOLVED = 'resolved',
}
registerEnumType(IncidentStatusValue, {
  name: 'IncidentStatus',
  description: 'TRIGGERED → ACKNOWLEDGED → RESOLVED (or TRIGGERED → RESOLVED); RESOLVED is final',
});

export enum IncidentSeverityValue {
  CRITICAL = 'critical',
  MAJOR = 'major',
  MINOR = 'minor',
  INFO = 'info',
  MAINTENANCE = 'maintenance',
}
registerEnumType(IncidentSeverityValue, {
  name: 'IncidentSeverity',
  description:
    'On the status page: CRITICAL is a major outage, MAJOR a partial outage, MINOR degraded performance, MAINTENANCE under maintenance, INFO nothing',
});

@ObjectType()
export class IncidentAssignee {
  @Field()
  name!: string;

  @Field(() => String, { nullable: true })
  email!: string | null;
}

@ObjectType({ description: 'The alerts grouped into an incident' })
export class IncidentAlerts {
  @Field(() => Int)
  count!: number;

  @Field(() => [String], { description: 'fast-burn, slow-burn, error-spike' })
  types!: string[];
}

@ObjectType('Incident')
export class IncidentNode {
  @Field(() => ID)
  id!: string;

  @Field()
  title!: string;

  @Field()
  description!: string;

  @Field(() => IncidentSeverityValue)
  severity!: IncidentSeverityValue;

  @Field(() => IncidentStatusValue)
  status!: IncidentStatusValue;

  @Field()
  service!: string;

  @Field(() => String, { nullable: true })
  runbookUrl!: string | null;

  @Field({ description: 'manual, slo (a burn-rate alert) or error_spike' })
  cause!: string;

  @Field(() => String, { nullable: true, description: 'The SLO id, or the project id of a spike' })
  causeId!: string | null;

  @Field(() => IncidentAssignee, { nullable: true })
  assignee!: IncidentAssignee | null;

  @Field(() => IncidentAlerts)
  alerts!: IncidentAlerts;

  @Field(() => DateTimeResolver)
  createdAt!: Date;

  @Field()
  createdBy!: string;

  @Field(() => DateTimeResolver)
  updatedAt!: Date;

  @Field(() => DateTimeResolver, { nullable: true })
  acknowledgedAt!: Date | null;

  @Field(() => String, { nullable: true })
  acknowledgedBy!: string | null;

  @Field(() => DateTimeResolver, { nullable: true })
  resolvedAt!: Date | null;

  @Field(() => String, { nullable: true })
  resolvedBy!: string | null;

  @Field(() => Int)
  projectId!: number;
}

@ObjectType()
export class IncidentEdge {
  @Field(() => IncidentNode)
  node!: IncidentNode;

  @Field()
  cursor!: string;
}

@ObjectType()
export class IncidentConnection {
  @Field(() => [IncidentEdge])
  edges!: IncidentEdge[];

  @Field(() => PageInfo)
  pageInfo!: PageInfo;
}

@InputType()
export class CreateIncidentInput {
  @Field({ description: 'The project’s id or slug (a secret key: its own project)' })
  project!: string;

  @Field()
  title!: string;

  @Field(() => IncidentSeverityValue)
  severity!: IncidentSeverityValue;

  @Field(() => String, { nullable: true })
  description?: string | null;

  @Field(() => String, { nullable: true, description: 'The project’s service unless given' })
  service?: string | null;

  @Field(() => String, { nullable: true })
  runbookUrl?: string | null;
}

@InputType()
export class IncidentAssigneeInput {
  @Field()
  name!: string;

  @Field(() => String, { nullable: true })
  email?: string | null;
}
