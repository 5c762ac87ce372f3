import { Arg, Authorized, ID, Mutation, Query, Resolver } from 'type-graphql';
import { ADMIN_ROLE } from '../../common/roles';
import type { ErrorTrackingServices } from './errortracking.services';
import { CreatedErrorToken, CreateErrorProjectInput, CreateErrorTokenInput, ErrorProject, ErrorToken, ErrorTokenKind } from './projects.types';

/** Projects and their keys: an administrator's (the dashboard's Settings, API Tokens). */
@Resolver()
export class ErrorProjectsResolver {
  constructor(private readonly services: ErrorTrackingServices) {}

  @Authorized(ADMIN_ROLE)
  @Query(() => [ErrorProject], { description: 'Error-tracking projects, oldest first' })
  errorProjects(): Promise<ErrorProject[]> {
    return this.services.projects.listProjects();
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [ErrorToken], { description: 'DSN and secret keys (never their secrets), of one project or all' })
  errorTokens(@Arg('project', () => String, { nullable: true, description: 'Id or slug' }) project: string | null): Promise<ErrorToken[]> {
    return this.services.projects.listTokens(project) as Promise<ErrorToken[]>;
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => ErrorProject, { description: 'Creates a project; its id is numeric, as Sentry DSNs need' })
  createErrorProject(@Arg('input', () => CreateErrorProjectInput) input: CreateErrorProjectInput): Promise<ErrorProject> {
    return this.services.projects.createProject(input);
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => CreatedErrorToken, { description: 'Creates a DSN or secret key; the token is shown this once' })
  async createErrorToken(@Arg('input', () => CreateErrorTokenInput) input: CreateErrorTokenInput): Promise<CreatedErrorToken> {
    const created = await this.services.projects.createToken(input);
    return { ...created, kind: created.kind as ErrorTokenKind };
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => ErrorToken, { description: 'Revokes a key at once: it authorises nothing more' })
  revokeErrorToken(@Arg('id', () => ID) id: string): Promise<ErrorToken> {
    return this.services.projects.revokeToken(id) as Promise<ErrorToken>;
  }
}
