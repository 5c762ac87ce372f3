import { DateTimeResolver } from 'graphql-scalars';
import { Field, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';

export enum ErrorTokenKind {
  DSN = 'dsn',
  SECRET = 'secret',
}
registerEnumType(ErrorTokenKind, {
  name: 'ErrorTokenKind',
  description: 'DSN: authorises event ingestion for one project; SECRET: authorises the management API (GraphQL at /api/graphql and REST)',
});

@ObjectType({ description: 'What errors, SLOs and incidents belong to' })
export class ErrorProject {
  @Field(() => Int, { description: 'Numeric, as Sentry DSNs need' })
  id!: number;

  @Field()
  name!: string;

  @Field()
  slug!: string;

  @Field({ description: 'The service this project tracks' })
  service!: string;

  @Field(() => DateTimeResolver)
  createdAt!: Date;
}

@InputType()
export class CreateErrorProjectInput {
  @Field()
  name!: string;

  @Field({ description: 'Lower-case letters, digits and inner hyphens; also the status page path' })
  slug!: string;

  @Field()
  service!: string;
}

@ObjectType({ description: 'A DSN or secret key; its secret is shown only when it is created' })
export class ErrorToken {
  @Field(() => ID, { description: 'The middle part of the token' })
  id!: string;

  @Field(() => Int)
  projectId!: number;

  @Field(() => ErrorTokenKind)
  kind!: ErrorTokenKind;

  @Field()
  name!: string;

  @Field(() => DateTimeResolver)
  createdAt!: Date;

  @Field(() => DateTimeResolver, { nullable: true })
  revokedAt!: Date | null;
}

@InputType()
export class CreateErrorTokenInput {
  @Field({ description: 'The project’s id or slug' })
  project!: string;

  @Field(() => ErrorTokenKind)
  kind!: ErrorTokenKind;

  @Field()
  name!: string;
}

@ObjectType()
export class CreatedErrorToken {
  @Field(() => ID)
  id!: string;

  @Field({ description: '`dsn_<id>_<secret>` or `sk_<id>_<secret>`: shown once, stored only as a hash' })
  token!: string;

  @Field(() => String, { nullable: true, description: 'For a DSN key: `http(s)://<token>@<host>/<project-id>`, what Sentry SDKs take' })
  dsn!: string | null;

  @Field(() => ErrorTokenKind)
  kind!: ErrorTokenKind;

  @Field(() => Int)
  projectId!: number;

  @Field()
  name!: string;
}
