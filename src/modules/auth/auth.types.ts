import { JSONObjectResolver } from 'graphql-scalars';
import { Field, ObjectType } from 'type-graphql';

@ObjectType({ description: 'The session a request runs with, as the server resolved it' })
export class SessionInfo {
  @Field({ description: 'The role the request runs as' })
  role!: string;

  @Field(() => String, { nullable: true, description: 'x-gql-user-id, when the caller is a user' })
  user_id!: string | null;

  @Field(() => [String], { description: 'The roles the token allows (X-Gql-Role may pick one)' })
  allowed_roles!: string[];

  @Field(() => JSONObjectResolver, { description: 'Every x-gql-* session variable' })
  variables!: Record<string, string>;
}
