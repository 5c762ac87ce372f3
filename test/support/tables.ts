/** The relationships of the test tables authors, articles and the project's users: articles.author, authors.articles, articles.owner. */
export const TEST_RELATIONSHIPS = [
  { type: 'pg_create_object_relationship', args: { table: 'articles', name: 'author', using: { foreign_key_constraint_on: 'author_id' } } },
  {
    type: 'pg_create_array_relationship',
    args: { table: 'authors', name: 'articles', using: { foreign_key_constraint_on: { table: 'articles', column: 'author_id' } } },
  },
  {
    type: 'pg_create_object_relationship',
    args: { table: 'articles', name: 'owner', using: { manual_configuration: { remote_table: 'users', column_mapping: { user_id: 'id' } } } },
  },
];

/**
 * The spec's three row filters (spec 2 §2.3) as select permissions: role user on articles (its
 * own, user_id = X-Gql-User-Id) and authors, me on the project's users table (id =
 * X-Gql-User-Id), admin on users (source_account_id = X-Gql-Source-Account-Id).
 */
export const SPEC_PERMISSIONS = [
  {
    type: 'pg_create_select_permission',
    args: {
      table: 'articles',
      role: 'user',
      permission: { columns: ['id', 'title', 'author_id', 'user_id'], filter: { user_id: { _eq: 'X-Gql-User-Id' } }, limit: 10 },
    },
  },
  { type: 'pg_create_select_permission', args: { table: 'authors', role: 'user', permission: { columns: '*', filter: {}, allow_aggregations: true } } },
  {
    type: 'pg_create_select_permission',
    args: { table: 'users', role: 'me', permission: { columns: ['id', 'email', 'name'], filter: { id: { _eq: 'X-Hasura-User-Id' } } } },
  },
  {
    type: 'pg_create_select_permission',
    args: {
      table: 'users',
      role: 'admin',
      permission: { columns: ['id', 'email', 'source_account_id'], filter: { source_account_id: { _eq: 'X-Gql-Source-Account-Id' } } },
    },
  },
];
