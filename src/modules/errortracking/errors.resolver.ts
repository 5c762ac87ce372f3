import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { ErrorManagement, projectScope } from './access';
import type { ErrorRecord } from './errors.service';
import { ErrorConnection, ErrorFilter, ErrorNode, ErrorReceivedFilter, ErrorSeverity, ErrorStatusValue, SourceMap, StackFrame } from './errors.types';
import type { ErrorTrackingServices } from './errortracking.services';
import { ERROR_RECEIVED, type ReceivedError } from './ingest.service';
import { loadersOf } from './loaders';
import { ErrorProject } from './projects.types';

/** `Type: value` and the frames innermost first, each as `    at function (file:line:column)`. */
export function printStack(title: string, frames: readonly StackFrame[]): string {
  const lines = [title];
  for (let index = frames.length - 1; index >= 0; index--) {
    const frame = frames[index];
    const where = [frame.filename ?? frame.module ?? '<unknown>', frame.lineno, frame.colno].filter((part) => part !== null).join(':');
    lines.push(frame.function ? `    at ${frame.function} (${where})` : `    at ${where}`);
  }
  return lines.join('\n');
}

export function errorNode(record: ErrorRecord): ErrorNode {
  return {
    id: record.id,
    message: record.message,
    type: record.type,
    severity: record.level as ErrorSeverity,
    status: record.status as ErrorStatusValue,
    occurrenceCount: record.occurrenceCount,
    firstSeen: record.firstSeen,
    lastSeen: record.lastSeen,
    release: record.lastRelease,
    projectId: record.projectId,
    latestEventKey: record.lastEventId ? `${record.projectId}:${record.lastEventId}` : null,
  };
}

/** Grouped errors: the `errors` connection, status changes, merges and the errorReceived subscription. */
@Resolver(() => ErrorNode)
export class ErrorsResolver {
  constructor(private readonly services: ErrorTrackingServices) {}

  @ErrorManagement()
  @Query(() => ErrorConnection, { description: 'Grouped errors, newest first (a secret key sees its project’s only)' })
  async errors(
    @Arg('filter', () => ErrorFilter) filter: ErrorFilter,
    @Arg('first', () => Int, { nullable: true, description: '1 to 100; 20 by default' }) first: number | null,
    @Arg('after', () => String, { nullable: true }) after: string | null,
    @Ctx() context: GraphQLContext,
  ): Promise<ErrorConnection> {
    const page = await this.services.errors.list(projectScope(context.session), first, after, filter);
    return {
      edges: page.nodes.map(({ node, cursor }) => ({ node: errorNode(node), cursor })),
      pageInfo: { hasNextPage: page.hasNextPage, endCursor: page.endCursor },
    };
  }

  @ErrorManagement()
  @Query(() => ErrorNode, { description: 'One error by id' })
  async error(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ErrorNode> {
    return errorNode(await this.services.errors.get(projectScope(context.session), id));
  }

  @ErrorManagement()
  @Mutation(() => ErrorNode, {
    description:
      'Resolves an error in a release (given, else the latest its events named): only events of a newer release reopen it; without any release, any new event does',
  })
  async resolveError(
    @Arg('id', () => ID) id: string,
    @Arg('inRelease', () => String, { nullable: true }) inRelease: string | null,
    @Ctx() context: GraphQLContext,
  ): Promise<ErrorNode> {
    return errorNode(await this.services.errors.resolve(projectScope(context.session), id, inRelease));
  }

  @ErrorManagement()
  @Mutation(() => ErrorNode, { description: 'Ignores an error: it keeps counting events but stays IGNORED until reopened' })
  async ignoreError(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ErrorNode> {
    return errorNode(await this.services.errors.ignore(projectScope(context.session), id));
  }

  @ErrorManagement()
  @Mutation(() => ErrorNode, { description: 'Makes a resolved or ignored error UNRESOLVED again' })
  async reopenError(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ErrorNode> {
    return errorNode(await this.services.errors.reopen(projectScope(context.session), id));
  }

  @ErrorManagement()
  @Mutation(() => ErrorNode, {
    description: 'Merges errors of one project into `into`: their events and counts move to it, and their fingerprints lead new events to it',
  })
  async mergeErrors(@Arg('into', () => ID) into: string, @Arg('sources', () => [ID]) sources: string[], @Ctx() context: GraphQLContext): Promise<ErrorNode> {
    return errorNode(await this.services.errors.merge(projectScope(context.session), into, sources));
  }

  @ErrorManagement()
  @Subscription(() => ErrorNode, {
    topics: ERROR_RECEIVED,
    filter: ({ payload, args }: { payload: ReceivedError; args: { filter?: ErrorReceivedFilter | null } }) => {
      const filter = args.filter;
      if (!filter) return true;
      return (
        (!filter.severity || filter.severity === payload.level) &&
        (!filter.service || filter.service === payload.service) &&
        (filter.project === null || filter.project === undefined || filter.project === payload.projectId)
      );
    },
    description: 'Errors as their events are received: one message per error per ingestion batch, after it is committed',
  })
  errorReceived(@Root() payload: ReceivedError, @Arg('filter', () => ErrorReceivedFilter, { nullable: true }) _filter: ErrorReceivedFilter | null): ErrorNode {
    return errorNode({
      id: payload.id,
      projectId: payload.projectId,
      message: payload.message,
      type: payload.type,
      level: payload.level as ErrorRecord['level'],
      status: payload.status as ErrorRecord['status'],
      occurrenceCount: payload.occurrenceCount,
      firstSeen: new Date(payload.firstSeen),
      lastSeen: new Date(payload.lastSeen),
      lastEventId: payload.lastEventId,
      lastRelease: payload.release,
      resolvedRelease: null,
    });
  }

  @FieldResolver(() => ErrorProject)
  async project(@Root() error: ErrorNode, @Ctx() context: GraphQLContext): Promise<ErrorProject> {
    return (await loadersOf(context, this.services).project.load(error.projectId))!;
  }

  @FieldResolver(() => String, { description: 'The service of the error’s project' })
  async service(@Root() error: ErrorNode, @Ctx() context: GraphQLContext): Promise<string> {
    return (await loadersOf(context, this.services).project.load(error.projectId))!.service;
  }

  @FieldResolver(() => String, {
    nullable: true,
    description: 'The latest event’s stack trace as V8 prints one (the frame that raised first); null without frames or once the event is removed',
  })
  async stackTrace(@Root() error: ErrorNode, @Ctx() context: GraphQLContext): Promise<string | null> {
    if (!error.latestEventKey) return null;
    const frames = await loadersOf(context, this.services).frames.load(error.latestEventKey);
    return frames.length === 0 ? null : printStack(error.message, frames);
  }

  @FieldResolver(() => [StackFrame], { description: 'The latest event’s frames, oldest call first (empty without one)' })
  async frames(@Root() error: ErrorNode, @Ctx() context: GraphQLContext): Promise<StackFrame[]> {
    return error.latestEventKey ? loadersOf(context, this.services).frames.load(error.latestEventKey) : [];
  }

  @FieldResolver(() => SourceMap, {
    nullable: true,
    description: 'The file and source context of the innermost frame of the application’s own code that has them',
  })
  async sourceMap(@Root() error: ErrorNode, @Ctx() context: GraphQLContext): Promise<SourceMap | null> {
    if (!error.latestEventKey) return null;
    const frames = await loadersOf(context, this.services).frames.load(error.latestEventKey);
    const withSource = frames.filter((frame) => frame.filename && frame.source);
    const frame = withSource.filter((candidate) => candidate.inApp).pop() ?? withSource.pop();
    return frame ? { filename: frame.filename!, source: frame.source! } : null;
  }
}
