import { Field, ObjectType } from 'type-graphql';

/** The Relay connection's page information, shared by every connection of the schema. */
@ObjectType({ description: 'Where a page of a connection ends, and whether more follow' })
export class PageInfo {
  @Field()
  hasNextPage!: boolean;

  @Field(() => String, { nullable: true, description: 'Pass as `after` for the next page; null on an empty page' })
  endCursor!: string | null;
}
