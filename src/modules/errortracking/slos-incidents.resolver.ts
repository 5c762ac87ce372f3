import DataLoader from 'dataloader';
import { Arg, Ctx, FieldResolver, Float, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { actorOf, ErrorManagement, projectScope } from './access';
import type { ErrorTrackingServices } from './errortracking.services';
import { INCIDENT_UPDATED, revivedIncident, type Incident } from './incidents.service';
import { notFound } from './problems';
import type { Slo, SloFigures } from './slos.service';
import {
  CreateIncidentInput,
  CreateSloInput,
  IncidentAssigneeInput,
  IncidentConnection,
  IncidentNode,
  IncidentSeverityValue,
  IncidentStatusValue,
  SloConnection,
  SloNode,
  SloStatusValue,
  UpdateSloInput,
} from './slos-incidents.types';

export function incidentNode(value: Incident): IncidentNode {
  return { ...value, severity: value.severity as IncidentSeverityValue, status: value.status as IncidentStatusValue };
}

/** The project a call names, which a secret key may only name as its own. */
export async function projectFor(services: ErrorTrackingServices, context: GraphQLContext, reference: string): Promise<number> {
  const project = await services.projects.findProject(reference);
  const scope = projectScope(context.session);
  if (scope !== null && scope !== project.id) throw notFound(`project "${reference}"`);
  return project.id;
}

const figuresLoaders = new WeakMap<GraphQLContext, DataLoader<SloNode, SloFigures, string>>();

/** SLOs: their figures computed for a whole page in one query. */
@Resolver(() => SloNode)
export class SlosResolver {
  constructor(private readonly services: ErrorTrackingServices) {}

  private figures(slo: SloNode, context: GraphQLContext): Promise<SloFigures> {
    let loader = figuresLoaders.get(context);
    if (!loader) {
      loader = new DataLoader(
        async (slos) => {
          const figures = await this.services.slos.figuresOf(slos as Slo[]);
          return slos.map((slo) => figures.get(slo.id)!);
        },
        { cacheKeyFn: (slo) => slo.id },
      );
      figuresLoaders.set(context, loader);
    }
    return loader.load(slo);
  }

  @ErrorManagement()
  @Query(() => SloConnection, { description: 'SLOs in creation order (a secret key sees its project’s only)' })
  async slos(
    @Arg('first', () => Int, { nullable: true, description: '1 to 100; 20 by default' }) first: number | null,
    @Arg('after', () => String, { nullable: true }) after: string | null,
    @Arg('service', () => String, { nullable: true }) service: string | null,
    @Ctx() context: GraphQLContext,
  ): Promise<SloConnection> {
    const page = await this.services.slos.list(projectScope(context.session), first, after, service);
    return { edges: page.nodes, pageInfo: { hasNextPage: page.hasNextPage, endCursor: page.endCursor } };
  }

  @ErrorManagement()
  @Query(() => SloNode)
  slo(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<SloNode> {
    return this.services.slos.get(projectScope(context.session), id);
  }

  @ErrorManagement()
  @Mutation(() => SloNode, { description: 'Creates an SLO over a service’s good and bad events (the requests Plinth serves for it, and what it reports)' })
  async createSlo(@Arg('input', () => CreateSloInput) input: CreateSloInput, @Ctx() context: GraphQLContext): Promise<SloNode> {
    return this.services.slos.create(await projectFor(this.services, context, input.project), input);
  }

  @ErrorManagement()
  @Mutation(() => SloNode, { description: 'Changes an SLO’s name, target or alert threshold (as PATCH /api/slos/{id})' })
  updateSlo(@Arg('id', () => ID) id: string, @Arg('input', () => UpdateSloInput) input: UpdateSloInput, @Ctx() context: GraphQLContext): Promise<SloNode> {
    return this.services.slos.update(projectScope(context.session), id, input);
  }

  @ErrorManagement()
  @Mutation(() => SloNode)
  deleteSlo(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<SloNode> {
    return this.services.slos.delete(projectScope(context.session), id);
  }

  @FieldResolver(() => Float, { description: '(bad/total)/(1 − target) over the last hour: 1 spends the budget exactly over the window' })
  async currentBurnRate(@Root() slo: SloNode, @Ctx() context: GraphQLContext): Promise<number> {
    return (await this.figures(slo, context)).currentBurnRate;
  }

  @FieldResolver(() => Float, { description: '1 − (bad/total)/(1 − target) over the window; 0 or less once spent' })
  async errorBudgetRemaining(@Root() slo: SloNode, @Ctx() context: GraphQLContext): Promise<number> {
    return (await this.figures(slo, context)).errorBudgetRemaining;
  }

  @FieldResolver(() => SloStatusValue)
  async status(@Root() slo: SloNode, @Ctx() context: GraphQLContext): Promise<SloStatusValue> {
    return (await this.figures(slo, context)).status as SloStatusValue;
  }

  @FieldResolver(() => [String], { description: 'The burn-rate alerts firing: fast-burn (14.4× over 1 h and 5 min), slow-burn (6× over 6 h and 30 min)' })
  async alerts(@Root() slo: SloNode, @Ctx() context: GraphQLContext): Promise<string[]> {
    return (await this.figures(slo, context)).alerts;
  }

  @FieldResolver(() => Float, { description: 'Good and bad events over the window' })
  async totalEvents(@Root() slo: SloNode, @Ctx() context: GraphQLContext): Promise<number> {
    return (await this.figures(slo, context)).totalEvents;
  }

  @FieldResolver(() => Float, { description: 'Bad events over the window' })
  async badEvents(@Root() slo: SloNode, @Ctx() context: GraphQLContext): Promise<number> {
    return (await this.figures(slo, context)).badEvents;
  }
}

/** Incidents: listing, the moves, assignment, and incidentUpdated. */
@Resolver(() => IncidentNode)
export class IncidentsResolver {
  constructor(private readonly services: ErrorTrackingServices) {}

  @ErrorManagement()
  @Query(() => IncidentConnection, { description: 'Incidents, newest first (a secret key sees its project’s only)' })
  async incidents(
    @Arg('status', () => IncidentStatusValue, { nullable: true }) status: IncidentStatusValue | null,
    @Arg('first', () => Int, { nullable: true, description: '1 to 100; 20 by default' }) first: number | null,
    @Arg('after', () => String, { nullable: true }) after: string | null,
    @Ctx() context: GraphQLContext,
  ): Promise<IncidentConnection> {
    const page = await this.services.incidents.list(projectScope(context.session), status, first, after);
    return {
      edges: page.nodes.map(({ node, cursor }) => ({ node: incidentNode(node), cursor })),
      pageInfo: { hasNextPage: page.hasNextPage, endCursor: page.endCursor },
    };
  }

  @ErrorManagement()
  @Query(() => IncidentNode)
  async incident(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<IncidentNode> {
    return incidentNode(await this.services.incidents.get(projectScope(context.session), id));
  }

  @ErrorManagement()
  @Mutation(() => IncidentNode, { description: 'Opens an incident (TRIGGERED), as POST /api/incidents does' })
  async createIncident(@Arg('input', () => CreateIncidentInput) input: CreateIncidentInput, @Ctx() context: GraphQLContext): Promise<IncidentNode> {
    return incidentNode(await this.services.incidents.create(await projectFor(this.services, context, input.project), input, actorOf(context.session)));
  }

  @ErrorManagement()
  @Mutation(() => IncidentNode, { description: 'TRIGGERED → ACKNOWLEDGED, stamped with the time and the caller' })
  async acknowledgeIncident(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<IncidentNode> {
    return incidentNode(await this.services.incidents.acknowledge(projectScope(context.session), id, actorOf(context.session)));
  }

  @ErrorManagement()
  @Mutation(() => IncidentNode, { description: 'TRIGGERED or ACKNOWLEDGED → RESOLVED, stamped with the time and the caller' })
  async resolveIncident(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<IncidentNode> {
    return incidentNode(await this.services.incidents.resolve(projectScope(context.session), id, actorOf(context.session)));
  }

  @ErrorManagement()
  @Mutation(() => IncidentNode, { description: 'Assigns an open incident (null: nobody)' })
  async assignIncident(
    @Arg('id', () => ID) id: string,
    @Arg('assignee', () => IncidentAssigneeInput, { nullable: true }) assignee: IncidentAssigneeInput | null,
    @Ctx() context: GraphQLContext,
  ): Promise<IncidentNode> {
    return incidentNode(await this.services.incidents.assign(projectScope(context.session), id, assignee));
  }

  @ErrorManagement()
  @Subscription(() => IncidentNode, { topics: INCIDENT_UPDATED, description: 'Incidents as they are opened, alerted, moved or assigned' })
  incidentUpdated(@Root() payload: Incident): IncidentNode {
    return incidentNode(revivedIncident(payload));
  }
}
