import pg from 'pg';
import { metadataRequest } from '../support/metadata';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

/*
 * Queries copied unchanged from Hasura v2's documentation (hasura/graphql-engine,
 * docs/docs/queries/postgres/), run through POST /v1/graphql as the admin after tracking the
 * tables they name, and compared with hand-written SQL over the same rows. The pages' sample
 * answers come from other data, so the expected answers are computed here; the rows are chosen so
 * that every ordered list has one right order (or is compared by its sort key where rows tie).
 */

let server: TestServer;
/** One connection for the expected answers. */
let oracle: pg.Client;
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };

const SCHEMA = `
  CREATE EXTENSION IF NOT EXISTS ltree;
  CREATE TABLE authors (id serial PRIMARY KEY, name text NOT NULL, address jsonb);
  CREATE TABLE articles (
    id serial PRIMARY KEY, title text NOT NULL, content text, rating int, is_published boolean, published_on date, publisher text,
    author_id int NOT NULL REFERENCES authors (id));
  CREATE SCHEMA docs;
  CREATE TABLE docs.users (id serial PRIMARY KEY, name text NOT NULL, age int);
  CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, price numeric NOT NULL, metadata jsonb);
  CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, tags jsonb);
  CREATE TABLE employees (id serial PRIMARY KEY, name text NOT NULL, department text NOT NULL, salary int NOT NULL);
  CREATE TABLE orders (id serial PRIMARY KEY, items jsonb);
  CREATE TABLE "user" (id serial PRIMARY KEY, name text NOT NULL, address jsonb);
  CREATE TABLE permissions (id serial PRIMARY KEY, name text NOT NULL, user_id int NOT NULL REFERENCES "user" (id));
  CREATE TABLE author (id serial PRIMARY KEY, name text, first_name text, last_name text);
  CREATE TABLE student (id serial PRIMARY KEY, roll_no int NOT NULL, name text NOT NULL, physics int, chemistry int, maths int);
  CREATE TABLE restaurant (id serial PRIMARY KEY, name text NOT NULL);
  CREATE TABLE reviews (id serial PRIMARY KEY, restaurant_id int NOT NULL REFERENCES restaurant (id), rating int, reviewer text);
  CREATE TABLE tree (id serial PRIMARY KEY, path ltree NOT NULL);
  CREATE TABLE geom_table (id serial PRIMARY KEY, geom_col point);
  CREATE TABLE dummy_rast (rid serial PRIMARY KEY, rast bytea);
  CREATE TABLE cities (id serial PRIMARY KEY, name text NOT NULL, location point);
`;

/*
 * Ratings run 0 to 9: unique within each author (nested lists ordered by rating), one 9, one 8 and
 * one 0 (the top two and the worst article), and (rating, published_on) unique. Authors: one with
 * every article published, some with none, Ninnetta with no article; null is_published and
 * published_on on some rows.
 */
const SEED = `
  INSERT INTO authors (id, name, address) VALUES
    (1, 'Justin', '{"street_address": "161, 19th Main Road", "city": "Bengaluru", "pincode": 560095, "phone": "9090909090"}'),
    (2, 'Beltran', '{"city": "Mumbai", "pincode": 400001}'),
    (3, 'Sidney', NULL),
    (4, 'Anjela', '{"city": "Bengaluru", "pincode": 560001, "phone": "8080808080"}'),
    (5, 'Amii', '{"city": "Pune", "pincode": 560095}'),
    (6, 'Corny', NULL),
    (7, 'Berti', '{"phone": "7070707070"}'),
    (8, 'April', NULL),
    (9, 'Ninnetta', NULL),
    (10, 'Lyndsay', '{}');
  SELECT setval('authors_id_seq', 10);
  INSERT INTO articles (id, title, content, rating, is_published, published_on, publisher, author_id) VALUES
    (1, 'sit amet', 'one', 1, true, '2017-08-09', 'Mountain World', 1),
    (2, 'vel dapibus at', 'two', 4, true, '2018-01-02', 'Broadway World', 1),
    (3, 'sem duis aliquam', NULL, 5, true, '2018-02-14', NULL, 1),
    (4, 'a lorem ipsum', 'four', 7, true, NULL, 'Fajita World', 1),
    (5, 'a nibh', 'five', 3, true, '2018-06-10', 'Mountain World', 2),
    (6, 'sit amet', 'six', 5, true, '2017-05-16', NULL, 2),
    (7, 'donec semper sapien', 'seven', 2, true, '2016-11-03', 'Fajita World', 2),
    (8, 'sapien ut', 'eight', 1, true, '2018-01-08', 'Broadway World', 3),
    (9, 'turpis eget', NULL, 3, true, '2017-04-14', 'Mountain World', 3),
    (10, 'congue etiam justo', 'ten', 6, false, NULL, NULL, 3),
    (11, 'amet justo morbi', 'eleven', 4, true, '2017-05-26', 'Fajita World', 4),
    (12, 'cremet justo', 'twelve', 2, NULL, NULL, 'Broadway World', 4),
    (13, 'vestibulum ac est', 'thirteen', 2, true, '2017-03-05', NULL, 5),
    (14, 'volutpat quam pede', NULL, 3, NULL, '2018-03-10', 'Mountain World', 5),
    (15, 'montes nascetur ridiculus', 'fifteen', 9, true, NULL, 'Fajita World', 5),
    (16, 'ut blandit', 'sixteen', 5, false, '2016-07-09', NULL, 6),
    (17, 'sit ametist', 'seventeen', 8, true, '2018-05-01', 'Broadway World', 6),
    (18, 'ipsum primis in', 'eighteen', 2, false, '2017-12-31', 'Mountain World', 7),
    (19, 'vulputate elementum', NULL, 4, true, '2018-03-10', NULL, 8),
    (20, 'eu nibh', 'twenty', 3, true, '2017-01-01', 'Fajita World', 8),
    (21, 'dui proin leo', 'twenty-one', 0, false, NULL, 'Broadway World', 10);
  SELECT setval('articles_id_seq', 21);
  INSERT INTO docs.users (name, age) VALUES
    ('John Doe', 20), ('John Smith', 25), ('Jane Doe', 30), ('Jon Smith', NULL), ('Tom Smith', 40), ('Alan Doe', 28), ('jonathan', 35), ('/J/ohn', 31);
  INSERT INTO products (name, price, metadata) VALUES
    ('Bread', 2.5, '{"price": 2.5}'), ('Milk', 3.5, NULL), ('Eggs', 4.5, '{"stock": 3}'), ('Cheese', 10, '{"price": 10}'), ('Wine', 12.75, '{"price": 12.75}');
  INSERT INTO items (name, tags) VALUES
    ('Item 1', '{"value": ["tag1", "tag2"]}'), ('Item 2', '{"value": ["tag1"]}'), ('Item 3', '{"value": ["tag3"]}'),
    ('Item 4', '{"value": ["tag1", "tag2"], "extra": 1}'), ('Item 5', NULL);
  INSERT INTO employees (name, department, salary) VALUES
    ('Kamila', 'Engineering', 4325), ('Ann', 'Engineering', 4000), ('Damien', 'Product', 3124), ('Paul', 'Product', 3000),
    ('Rickard', 'Services', 2223), ('Mo', 'Services', 1500), ('Lee', 'Engineering', 1200);
  INSERT INTO orders (items) VALUES ('[{"name": "Widget", "quantity": 10, "price": 9.99}]'), ('[{"name": "Gadget", "quantity": 2}]');
  INSERT INTO "user" (name, address) VALUES ('Ash', '{"street": "1 Main St.", "city": "Anytown", "state": "CA", "zip": "12345"}');
  INSERT INTO permissions (name, user_id) VALUES ('admin', 1), ('editor', 1);
  INSERT INTO author (name, first_name, last_name) VALUES ('Bob Marley', 'Bob', 'Marley');
  INSERT INTO student (roll_no, name, physics, chemistry, maths) VALUES (34, 'Alice', 23, 22, 14), (31, 'Bob', 21, 22, 17);
  INSERT INTO restaurant (name) VALUES ('Noma');
  INSERT INTO reviews (restaurant_id, rating, reviewer) VALUES (1, 9, 'ann');
  INSERT INTO tree (path) VALUES ('Tree'), ('Tree.Hobbies'), ('Tree.Collections.Pictures');
`;

const track = (table: string | { schema: string; name: string }, configuration?: Record<string, unknown>) => ({
  type: 'pg_track_table',
  args: configuration ? { table, configuration } : { table },
});
const TRACKING = [
  ...[
    'authors',
    'articles',
    'products',
    'items',
    'employees',
    'orders',
    'user',
    'permissions',
    'author',
    'student',
    'restaurant',
    'reviews',
    'tree',
    'geom_table',
    'dummy_rast',
    'cities',
  ].map((table) => track(table)),
  // A table named users is the project's own: the pages' users table lives in a schema of its own, under its name.
  track({ schema: 'docs', name: 'users' }, { custom_name: 'users' }),
  { type: 'pg_create_object_relationship', args: { table: 'articles', name: 'author', using: { foreign_key_constraint_on: 'author_id' } } },
  {
    type: 'pg_create_array_relationship',
    args: { table: 'authors', name: 'articles', using: { foreign_key_constraint_on: { table: 'articles', column: 'author_id' } } },
  },
  {
    type: 'pg_create_array_relationship',
    args: { table: 'user', name: 'permissions', using: { foreign_key_constraint_on: { table: 'permissions', column: 'user_id' } } },
  },
  {
    type: 'pg_create_array_relationship',
    args: { table: 'restaurant', name: 'reviews', using: { foreign_key_constraint_on: { table: 'reviews', column: 'restaurant_id' } } },
  },
];

/** The rows of `select` as JSON objects keyed by its column names, in its order. */
async function list(select: string): Promise<unknown[]> {
  return (await oracle.query<{ j: unknown[] }>(`SELECT coalesce(json_agg(row_to_json(q)), '[]'::json) AS j FROM (${select}) AS q`)).rows[0].j;
}
/** The one JSON value `select` computes (as its column j). */
async function value(select: string): Promise<unknown> {
  return (await oracle.query<{ j: unknown }>(select)).rows[0].j;
}
/** A correlated list inside an outer select: the rows of `select` as a JSON array. */
const rowsOf = (select: string) => `(SELECT coalesce(json_agg(row_to_json(x)), '[]'::json) FROM (${select}) AS x)`;
/** A correlated object inside an outer select: the row of `select` as JSON, or null. */
const rowOf = (select: string) => `(SELECT row_to_json(x) FROM (${select}) AS x)`;

type Row = Record<string, unknown>;
interface DocQuery {
  /** The page under docs/docs/queries/postgres/ the query is copied from (and others showing the same text). */
  doc: string;
  title: string;
  query: string;
  variables?: Record<string, unknown>;
  /** The answer, computed with SQL over the seeded rows. */
  expected: () => Promise<unknown>;
  /** Lists the query orders, by the path of their field: the key the rows must come in the order of (rows tying on it compare as a set). */
  ordered?: Record<string, (row: Row) => unknown>;
  /** Lists the query limits without ordering them: any of the expected rows, as many as limit and offset let through. */
  limited?: Record<string, { limit: number; offset?: number }>;
  /** Why the query selects no row of the seeded data (the page's own pattern can match nothing). */
  selectsNothing?: string;
}

const DOC_QUERIES: DocQuery[] = [
  // --- query-filters.mdx (the where argument, comparison operators, _not, _and, _or, nested objects) ---
  {
    doc: 'query-filters.mdx',
    title: 'an author whose name is "Sidney"',
    query: `query {
  authors(
    where: {name: {_eq: "Sidney"}}
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list(`SELECT id, name FROM authors WHERE name = 'Sidney'`) }),
  },
  {
    doc: 'query-filters.mdx',
    title: 'authors who have articles rated above 4, with those articles',
    query: `query {
  authors (where: {articles: {rating: {_gt: 4}}}) {
    id
    name
    articles (where: {rating: {_gt: 4}}) {
      id
      title
      rating
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT ar.id, ar.title, ar.rating FROM articles ar WHERE ar.author_id = au.id AND ar.rating > 4')} AS articles
           FROM authors au WHERE EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id AND ar.rating > 4)`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'the author whose id is 3 (_eq on an integer)',
    query: `query {
  authors(
    where: {id: {_eq: 3}}
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors WHERE id = 3') }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles not published (_eq on a boolean)',
    query: `query {
  articles(
    where: {is_published: {_eq: false}}
  ) {
    id
    title
    is_published
  }
}`,
    expected: async () => ({ articles: await list('SELECT id, title, is_published FROM articles WHERE is_published = false') }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles published on a date (_eq on a date)',
    query: `query {
  articles(
    where: {published_on: {_eq: "2017-05-26"}}
  ) {
    id
    title
    published_on
  }
}`,
    expected: async () => ({ articles: await list(`SELECT id, title, published_on FROM articles WHERE published_on = '2017-05-26'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles whose is_published is false or null (_or with _is_null)',
    query: `query {
  articles (
    where: {
      _or: [
        {is_published: {_eq: false}},
        {is_published: {_is_null: true}}
      ]
    }
  )
  {
    id
    title
    is_published
  }
}`,
    expected: async () => ({ articles: await list('SELECT id, title, is_published FROM articles WHERE is_published = false OR is_published IS NULL') }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles rated 4 or more (_gte)',
    query: `query {
  articles(
    where: {rating: {_gte: 4}}
  ) {
    id
    title
    rating
  }
}`,
    expected: async () => ({ articles: await list('SELECT id, title, rating FROM articles WHERE rating >= 4') }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'authors whose names sort after "M" (_gt on text)',
    query: `query {
  authors(
    where: {name: {_gt: "M"}}
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list(`SELECT id, name FROM authors WHERE name > 'M'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles published on or after 2018-01-01 (_gte on a date)',
    query: `query {
  articles(
    where: {published_on: {_gte: "2018-01-01"}}
  ) {
    id
    title
    published_on
  }
}`,
    expected: async () => ({ articles: await list(`SELECT id, title, published_on FROM articles WHERE published_on >= '2018-01-01'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles rated 1, 3 or 5 (_in)',
    query: `query {
  articles(
    where: {rating: {_in: [1,3,5]}}
  ) {
    id
    title
    rating
  }
}`,
    expected: async () => ({ articles: await list('SELECT id, title, rating FROM articles WHERE rating IN (1, 3, 5)') }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'authors whose names are not in a list (_nin)',
    query: `query {
  authors(
    where: {name: {_nin: ["Justin","Sidney","April"]}}
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list(`SELECT id, name FROM authors WHERE name NOT IN ('Justin', 'Sidney', 'April')`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/text-search-operators.mdx)',
    title: 'articles whose titles contain "amet" (_like)',
    query: `query {
  articles(
    where: {title: {_like: "%amet%"}}
  ) {
    id
    title
  }
}`,
    expected: async () => ({ articles: await list(`SELECT id, title FROM articles WHERE title LIKE '%amet%'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/text-search-operators.mdx)',
    title: 'authors whose names begin with A or C (_similar)',
    query: `query {
  authors(
    where: {name: {_similar: "(A|C)%"}}
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list(`SELECT id, name FROM authors WHERE name SIMILAR TO '(A|C)%'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/text-search-operators.mdx)',
    title: 'articles whose titles match [ae]met (_regex)',
    query: `query {
  articles(
    where: {title: {_regex: "[ae]met"}}
  ) {
    id
    title
  }
}`,
    expected: async () => ({ articles: await list(`SELECT id, title FROM articles WHERE title ~ '[ae]met'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/jsonb-operators.mdx)',
    title: 'authors living within a pincode (_contains with a jsonb variable)',
    query: `query get_authors_in_pincode ($jsonFilter: jsonb){
  authors(
    where: {
      address: {_contains: $jsonFilter }
    }
  ) {
    id
    name
    address
  }
}`,
    variables: { jsonFilter: { pincode: 560095 } },
    expected: async () => ({ authors: await list(`SELECT id, name, address FROM authors WHERE address @> '{"pincode": 560095}'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/jsonb-operators.mdx)',
    title: 'authors whose address has a phone (_has_key)',
    query: `query get_authors_if_phone {
  authors(
    where: {
      address: {_has_key: "phone" }
    }
  ) {
    id
    name
    address
  }
}`,
    expected: async () => ({ authors: await list(`SELECT id, name, address FROM authors WHERE address ? 'phone'`) }),
  },
  {
    doc: 'query-filters.mdx (and filters/comparison-operators.mdx)',
    title: 'articles with a published_on (_is_null: false)',
    query: `query {
  articles(
    where: {published_on: {_is_null: false}}
  ) {
    id
    title
    published_on
  }
}`,
    expected: async () => ({ articles: await list('SELECT id, title, published_on FROM articles WHERE published_on IS NOT NULL') }),
  },
  {
    doc: 'query-filters.mdx (and filters/boolean-operators.mdx)',
    title: 'authors without a published article (_not)',
    query: `{
  authors(
    where: {
      _not: {
        articles: { is_published: {_eq: true} }
      }
    }) {
    id
    name
    articles {
      title
      is_published
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT ar.title, ar.is_published FROM articles ar WHERE ar.author_id = au.id')} AS articles
           FROM authors au WHERE NOT EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id AND ar.is_published = true)`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/boolean-operators.mdx)',
    title: 'articles published in 2017 (_and)',
    query: `query {
  articles (
    where: {
      _and: [
        { published_on: {_gte: "2017-01-01"}},
        { published_on: {_lte: "2017-12-31"}}
      ]
    }
  )
  {
    id
    title
    published_on
  }
}`,
    expected: async () => ({
      articles: await list(`SELECT id, title, published_on FROM articles WHERE published_on >= '2017-01-01' AND published_on <= '2017-12-31'`),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/boolean-operators.mdx)',
    title: 'articles rated 4 or more or published from 2018 (_or)',
    query: `query {
  articles (
    where: {
      _or: [
        {rating: {_gte: 4}},
        {published_on: {_gte: "2018-01-01"}}
      ]
    }
  )
  {
    id
    title
    rating
    published_on
  }
}`,
    expected: async () => ({
      articles: await list(`SELECT id, title, rating, published_on FROM articles WHERE rating >= 4 OR published_on >= '2018-01-01'`),
    }),
  },
  {
    doc: 'query-filters.mdx',
    title: 'every author with only their articles rated 5 (where on an array relationship)',
    query: `{
  authors {
    id
    name
    articles(where: {rating: {_eq: 5}}) {
      title
      rating
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT title, rating FROM articles ar WHERE ar.author_id = au.id AND ar.rating = 5')} AS articles FROM authors au`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx',
    title: "articles whose author's name is Sidney (object relationship in where)",
    query: `query {
  articles (where: {author: {name: {_eq: "Sidney"}}}) {
    id
    title
  }
}`,
    expected: async () => ({
      articles: await list(`SELECT ar.id, ar.title FROM articles ar JOIN authors au ON au.id = ar.author_id WHERE au.name = 'Sidney'`),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    title: "articles whose author's name starts with A",
    query: `{
  articles (
    where: {
      author: {
        name: { _similar: "A%"}
      }
    }
  ) {
    id
    title
    author {
      name
    }
  }
}`,
    expected: async () => ({
      articles: await list(
        `SELECT ar.id, ar.title, ${rowOf('SELECT au.name FROM authors au WHERE au.id = ar.author_id')} AS author
           FROM articles ar WHERE EXISTS (SELECT 1 FROM authors au WHERE au.id = ar.author_id AND au.name SIMILAR TO 'A%')`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    title: 'authors with at least one article rated 1 (any of an array relationship)',
    query: `{
  authors(
    where: {
      articles: {rating: {_eq: 1}}
    }
  ) {
    id
    name
    articles {
      title
      rating
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT ar.title, ar.rating FROM articles ar WHERE ar.author_id = au.id')} AS articles
           FROM authors au WHERE EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id AND ar.rating = 1)`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    title: 'authors whose articles are all published (_not of the inverse)',
    query: `{
  authors (
    where: {
      _not: {
        articles: {is_published: {_neq: true}}
      }
    }
  ) {
    id
    name
    articles {
      title
      is_published
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT ar.title, ar.is_published FROM articles ar WHERE ar.author_id = au.id')} AS articles
           FROM authors au WHERE NOT EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id AND ar.is_published <> true)`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    title: 'authors none of whose articles is published',
    query: `{
  authors(
    where: {
      _not: {
        articles: {is_published: {_eq: true}}
      }
    }
  ) {
    id
    name
    articles {
      title
      is_published
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT ar.title, ar.is_published FROM articles ar WHERE ar.author_id = au.id')} AS articles
           FROM authors au WHERE NOT EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id AND ar.is_published = true)`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    title: 'authors with at least one article (the {} expression on a relationship)',
    query: `{
  authors (
    where: {
      articles: {}
    }
  ) {
    id
    name
    articles_aggregate {
      aggregate {
        count
      }
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, json_build_object('aggregate', json_build_object('count', (SELECT count(*) FROM articles ar WHERE ar.author_id = au.id))) AS articles_aggregate
           FROM authors au WHERE EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id)`,
      ),
    }),
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    title: 'authors without any article',
    query: `{
  authors (
    where: {
      _not: {
        articles: {}
      }
    }
  ) {
    id
    name
    articles_aggregate {
      aggregate {
        count
      }
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, json_build_object('aggregate', json_build_object('count', 0)) AS articles_aggregate
           FROM authors au WHERE NOT EXISTS (SELECT 1 FROM articles ar WHERE ar.author_id = au.id)`,
      ),
    }),
  },
  // --- filters/comparison-operators.mdx ---
  {
    doc: 'filters/comparison-operators.mdx',
    title: 'users whose age is not 30 (_neq leaves nulls out)',
    query: `query {
  users(where: { age: { _neq: 30 } }) {
    id
    name
    age
  }
}`,
    expected: async () => ({ users: await list('SELECT id, name, age FROM docs.users WHERE age <> 30') }),
  },
  {
    doc: 'filters/comparison-operators.mdx',
    title: 'users younger than 30 (_lt)',
    query: `query {
  users(where: { age: { _lt: 30 }}) {
    id
    name
    age
  }
}`,
    expected: async () => ({ users: await list('SELECT id, name, age FROM docs.users WHERE age < 30') }),
  },
  {
    doc: 'filters/comparison-operators.mdx',
    title: 'products priced 10 or less (_lte on numeric)',
    query: `query {
  products(where: { price: { _lte: 10 } }) {
    name
    price
  }
}`,
    expected: async () => ({ products: await list('SELECT name, price FROM products WHERE price <= 10') }),
  },
  // --- filters/text-search-operators.mdx ---
  {
    doc: 'filters/text-search-operators.mdx',
    title: 'users whose name contains "john" in any case (_ilike)',
    query: `query {
  users(where: { name: { _ilike: "%john%" } }) {
    id
    name
  }
}
`,
    expected: async () => ({ users: await list(`SELECT id, name FROM docs.users WHERE name ILIKE '%john%'`) }),
  },
  {
    doc: 'filters/text-search-operators.mdx',
    title: 'users whose name does not contain "John" in any case (_nilike)',
    query: `query {
  users(where: { name: { _nilike: "%John%" } }) {
    name
  }
}
`,
    expected: async () => ({ users: await list(`SELECT name FROM docs.users WHERE name NOT ILIKE '%John%'`) }),
  },
  {
    doc: 'filters/text-search-operators.mdx',
    title: 'authors whose names do not begin with A or C (_nsimilar)',
    query: `query {
  authors(
    where: {name: {_nsimilar: "(A|C)%"}}
  ) {
    id
    name
  }
}
  `,
    expected: async () => ({ authors: await list(`SELECT id, name FROM authors WHERE name NOT SIMILAR TO '(A|C)%'`) }),
  },
  {
    doc: 'filters/text-search-operators.mdx',
    title: 'users whose name matches a case-insensitive regular expression (_iregex)',
    query: `query {
  users(where: { name: { _iregex: "/^joh?n$/i" } }) {
    id
    name
  }
}`,
    expected: async () => ({ users: await list(`SELECT id, name FROM docs.users WHERE name ~* '/^joh?n$/i'`) }),
    selectsNothing: "the page's pattern keeps JavaScript's slashes and flag: PostgreSQL reads a slash before ^, which nothing matches",
  },
  {
    doc: 'filters/text-search-operators.mdx',
    title: 'users whose name does not match a regular expression (_nregex)',
    query: `query {
  users(where: { name: { _nregex: "/^J/" } }) {
    id
    name
  }
}`,
    expected: async () => ({ users: await list(`SELECT id, name FROM docs.users WHERE name !~ '/^J/'`) }),
  },
  // --- filters/jsonb-operators.mdx ---
  {
    doc: 'filters/jsonb-operators.mdx',
    title: 'items whose tags are contained in a value (_contained_in)',
    query: `query get_items_with_tags{
  items(
    where: {
      tags: {
        _contained_in: {
          value: ["tag1", "tag2"]
        }
      }
    }
  ) {
    id
    name
    tags
  }
}
`,
    expected: async () => ({ items: await list(`SELECT id, name, tags FROM items WHERE tags <@ '{"value": ["tag1", "tag2"]}'`) }),
  },
  // --- filters/using-nested-objects.mdx ---
  {
    doc: 'filters/using-nested-objects.mdx',
    title: "articles whose author's name is Sidney",
    query: `query {
  articles(where: { author: { name: { _eq: "Sidney" } } }) {
    id
    title
  }
}`,
    expected: async () => ({
      articles: await list(`SELECT ar.id, ar.title FROM articles ar JOIN authors au ON au.id = ar.author_id WHERE au.name = 'Sidney'`),
    }),
  },
  // --- sorting.mdx ---
  {
    doc: 'sorting.mdx',
    title: 'authors sorted by name',
    query: `query {
  authors (
    order_by: {name: asc}
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors ORDER BY name ASC') }),
    ordered: { authors: (row) => row.name },
  },
  {
    doc: 'sorting.mdx',
    title: 'authors sorted by name, each with their articles sorted by rating',
    query: `query {
  authors (order_by: {name: asc}) {
    id
    name
    articles(order_by: {rating: desc}) {
      id
      title
      rating
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, ${rowsOf('SELECT ar.id, ar.title, ar.rating FROM articles ar WHERE ar.author_id = au.id ORDER BY ar.rating DESC')} AS articles
           FROM authors au ORDER BY au.name ASC`,
      ),
    }),
    ordered: { authors: (row) => row.name, 'authors.articles': (row) => row.rating },
  },
  {
    doc: 'sorting.mdx',
    title: "articles sorted by their author's id, descending (order_by through an object relationship)",
    query: `query {
  articles (
    order_by: {author: {id: desc}}
  ) {
    id
    rating
    published_on
    author {
      id
      name
    }
  }
}`,
    expected: async () => ({
      articles: await list(
        `SELECT ar.id, ar.rating, ar.published_on, ${rowOf('SELECT au.id, au.name FROM authors au WHERE au.id = ar.author_id')} AS author
           FROM articles ar ORDER BY ar.author_id DESC`,
      ),
    }),
    ordered: { articles: (row) => (row.author as Row).id },
  },
  {
    doc: 'sorting.mdx',
    title: 'authors sorted by their article count, descending (order_by an array relationship aggregate)',
    query: `query {
  authors (
    order_by: {
      articles_aggregate: {count: desc}
    }
  ) {
    id
    name
    articles_aggregate {
      aggregate{
        count
      }
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, json_build_object('aggregate', json_build_object('count', n)) AS articles_aggregate
           FROM authors au, LATERAL (SELECT count(*) AS n FROM articles ar WHERE ar.author_id = au.id) AS counted ORDER BY n DESC`,
      ),
    }),
    ordered: { authors: (row) => ((row.articles_aggregate as Row).aggregate as Row).count },
  },
  {
    doc: 'sorting.mdx',
    title: 'authors sorted by their highest article rating, nulls last',
    query: `query {
  authors(
    order_by: {
      articles_aggregate: {
        max: {rating: asc_nulls_last}
      }
    }
  ) {
    id
    name
    articles_aggregate {
      aggregate{
        max {rating}
      }
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, json_build_object('aggregate', json_build_object('max', json_build_object('rating', top))) AS articles_aggregate
           FROM authors au, LATERAL (SELECT max(ar.rating) AS top FROM articles ar WHERE ar.author_id = au.id) AS best ORDER BY top ASC NULLS LAST`,
      ),
    }),
    ordered: { authors: (row) => (((row.articles_aggregate as Row).aggregate as Row).max as Row).rating },
  },
  {
    doc: 'sorting.mdx',
    title: 'articles sorted by rating, then by published_on with nulls first',
    query: `query {
  articles (
    order_by: [
      {rating: desc},
      {published_on: asc_nulls_first}
    ]
  ) {
    id
    rating
    published_on
  }
}`,
    expected: async () => ({ articles: await list('SELECT id, rating, published_on FROM articles ORDER BY rating DESC, published_on ASC NULLS FIRST') }),
    ordered: { articles: (row) => [row.rating, row.published_on] },
  },
  // --- pagination.mdx ---
  {
    doc: 'pagination.mdx',
    title: 'the first 5 authors (limit)',
    query: `query {
  authors(
    limit: 5
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors') }),
    limited: { authors: { limit: 5 } },
  },
  {
    doc: 'pagination.mdx',
    title: '5 authors from the 6th (limit and offset)',
    query: `query {
  authors(
    limit: 5,
    offset:5
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors') }),
    limited: { authors: { limit: 5, offset: 5 } },
  },
  {
    doc: 'pagination.mdx',
    title: 'authors with their first 2 articles (limit in a nested list)',
    query: `query {
  authors {
    id
    name
    articles (
      limit: 2
      offset: 0
    ) {
      id
      title
    }
  }
}`,
    expected: async () => ({
      authors: await list(`SELECT au.id, au.name, ${rowsOf('SELECT ar.id, ar.title FROM articles ar WHERE ar.author_id = au.id')} AS articles FROM authors au`),
    }),
    limited: { 'authors.articles': { limit: 2 } },
  },
  {
    doc: 'pagination.mdx',
    title: 'keyset pagination: 5 authors after id 5',
    query: `query {
  authors(
    limit: 5,
    where: { id: {_gt: 5} }
  ) {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors WHERE id > 5') }),
    limited: { authors: { limit: 5 } },
  },
  {
    doc: 'pagination.mdx',
    title: 'a page of articles with the total count of the same where',
    query: `query articles ($where: articles_bool_exp!) {
  articles_aggregate(where: $where) {
    aggregate {
      totalCount: count
    }
  }
  articles (where: $where limit: 4) {
    id
    title
  }
}`,
    variables: { where: { rating: { _gte: 3 } } },
    expected: async () => ({
      articles_aggregate: { aggregate: { totalCount: await value('SELECT count(*)::int AS j FROM articles WHERE rating >= 3') } },
      articles: await list('SELECT id, title FROM articles WHERE rating >= 3'),
    }),
    limited: { articles: { limit: 4 } },
  },
  // --- aggregation-queries.mdx ---
  {
    doc: 'aggregation-queries.mdx',
    title: 'articles with the count, sum, average and maximum of their ratings',
    query: `query {
  articles_aggregate {
    aggregate {
      count
      sum {
        rating
      }
      avg {
        rating
      }
      max {
        rating
      }
    }
    nodes {
      id
      title
      rating
    }
  }
}`,
    expected: async () => ({
      articles_aggregate: await value(
        `SELECT json_build_object(
           'aggregate', json_build_object('count', count(*), 'sum', json_build_object('rating', sum(rating)),
                                          'avg', json_build_object('rating', avg(rating)), 'max', json_build_object('rating', max(rating))),
           'nodes', json_agg(json_build_object('id', id, 'title', title, 'rating', rating))) AS j
         FROM articles`,
      ),
    }),
  },
  {
    doc: 'aggregation-queries.mdx',
    title: "author 1 with the aggregates of their articles' ratings (aggregate of an array relationship)",
    query: `query {
  authors (where: {id: {_eq: 1}}) {
    id
    name
    articles_aggregate {
      aggregate {
        count
        avg {
          rating
        }
        max {
          rating
        }
      }
      nodes {
        id
        title
        rating
      }
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name, (
           SELECT json_build_object('aggregate', json_build_object('count', count(*), 'avg', json_build_object('rating', avg(ar.rating)),
                                                                  'max', json_build_object('rating', max(ar.rating))),
                                    'nodes', json_agg(json_build_object('id', ar.id, 'title', ar.title, 'rating', ar.rating)))
             FROM articles ar WHERE ar.author_id = au.id) AS articles_aggregate
         FROM authors au WHERE au.id = 1`,
      ),
    }),
  },
  // --- distinct-queries.mdx ---
  {
    doc: 'distinct-queries.mdx',
    title: 'the employee with the highest salary of each department (distinct_on)',
    query: `query {
  employees (
    distinct_on: [department]
    order_by: [
      {department: asc},
      {salary: desc}
    ]
  ) {
    id
    name
    department
    salary
  }
}`,
    expected: async () => ({
      employees: await list('SELECT DISTINCT ON (department) id, name, department, salary FROM employees ORDER BY department ASC, salary DESC'),
    }),
    ordered: { employees: (row) => row.department },
  },
  // --- nested-object-queries.mdx ---
  {
    doc: 'nested-object-queries.mdx',
    title: "articles with their author's name (object relationship)",
    query: `query {
  articles {
    id
    title
    author {
      name
    }
  }
}`,
    expected: async () => ({
      articles: await list(`SELECT ar.id, ar.title, ${rowOf('SELECT au.name FROM authors au WHERE au.id = ar.author_id')} AS author FROM articles ar`),
    }),
  },
  {
    doc: 'nested-object-queries.mdx',
    title: "authors with each author's articles (array relationship)",
    query: `query {
  authors {
    id
    name
    articles {
      id
      title
    }
  }
}`,
    expected: async () => ({
      authors: await list(`SELECT au.id, au.name, ${rowsOf('SELECT ar.id, ar.title FROM articles ar WHERE ar.author_id = au.id')} AS articles FROM authors au`),
    }),
  },
  // --- simple-object-queries.mdx ---
  {
    doc: 'simple-object-queries.mdx',
    title: 'a list of authors',
    query: `query {
  authors {
    id
    name
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors') }),
  },
  {
    doc: 'simple-object-queries.mdx',
    title: 'an author by primary key (_by_pk)',
    query: `query {
  authors_by_pk(id: 1) {
    id
    name
  }
}`,
    expected: async () => ({ authors_by_pk: (await list('SELECT id, name FROM authors WHERE id = 1'))[0] }),
  },
  // --- multiple-arguments.mdx ---
  {
    doc: 'multiple-arguments.mdx',
    title: 'authors with 2 of their published articles, latest first (where, order_by and limit together)',
    query: `query {
  authors {
    id
    name
    articles(
      where: {is_published: {_eq: true}},
      order_by: {published_on: desc},
      limit: 2
    ) {
      id
      title
      is_published
      published_on
    }
  }
}`,
    expected: async () => ({
      authors: await list(
        `SELECT au.id, au.name,
           ${rowsOf('SELECT ar.id, ar.title, ar.is_published, ar.published_on FROM articles ar WHERE ar.author_id = au.id AND ar.is_published = true ORDER BY ar.published_on DESC LIMIT 2')} AS articles
         FROM authors au`,
      ),
    }),
    ordered: { 'authors.articles': (row) => row.published_on },
  },
  // --- multiple-queries.mdx ---
  {
    doc: 'multiple-queries.mdx',
    title: 'two root fields in one request',
    query: `query {
  authors(limit: 2) {
    id
    name
  }
  articles(limit: 2) {
    id
    title
  }
}`,
    expected: async () => ({ authors: await list('SELECT id, name FROM authors'), articles: await list('SELECT id, title FROM articles') }),
    limited: { authors: { limit: 2 }, articles: { limit: 2 } },
  },
  // --- variables-aliases-fragments-directives.mdx ---
  {
    doc: 'variables-aliases-fragments-directives.mdx',
    title: 'articles of an author given as a variable',
    query: `query getArticles($author_id: Int!) {
  articles(
    where: { author_id: { _eq: $author_id } }
  ) {
    id
    title
  }
}`,
    variables: { author_id: 1 },
    expected: async () => ({ articles: await list('SELECT id, title FROM articles WHERE author_id = 1') }),
  },
  {
    doc: 'variables-aliases-fragments-directives.mdx',
    title: 'all articles, the two top-rated and the worst-rated (aliases)',
    query: `query getArticles {
  articles {
    title
    rating
  }
  topTwoArticles: articles(
    order_by: {rating: desc},
    limit: 2
  ) {
    title
    rating
  }
  worstArticle: articles(
    order_by: {rating: asc},
    limit: 1
  ) {
    title
    rating
  }
}`,
    expected: async () => ({
      articles: await list('SELECT title, rating FROM articles'),
      topTwoArticles: await list('SELECT title, rating FROM articles ORDER BY rating DESC LIMIT 2'),
      worstArticle: await list('SELECT title, rating FROM articles ORDER BY rating ASC LIMIT 1'),
    }),
    ordered: { topTwoArticles: (row) => row.rating, worstArticle: (row) => row.rating },
  },
  {
    doc: 'variables-aliases-fragments-directives.mdx',
    title: 'a fragment of article fields used twice',
    query: `fragment articleFields on articles {
  id
  title
}
query getArticles {
  articles {
    ...articleFields
  }
  topTwoArticles: articles(
    order_by: {rating: desc},
    limit: 2
  ) {
    ...articleFields
  }
}`,
    expected: async () => ({
      articles: await list('SELECT id, title FROM articles'),
      topTwoArticles: await list('SELECT id, title FROM articles ORDER BY rating DESC LIMIT 2'),
    }),
    ordered: { topTwoArticles: (row) => row.id },
  },
  ...[true, false].map((withPublisher): DocQuery => ({
    doc: 'variables-aliases-fragments-directives.mdx',
    title: `@include(if: $with_publisher) with ${withPublisher}`,
    query: `query getArticles($with_publisher: Boolean!) {
  articles {
    title
    publisher @include(if: $with_publisher)
  }
}`,
    variables: { with_publisher: withPublisher },
    expected: async () => ({ articles: await list(withPublisher ? 'SELECT title, publisher FROM articles' : 'SELECT title FROM articles') }),
  })),
  ...[true, false].map((withPublisher): DocQuery => ({
    doc: 'variables-aliases-fragments-directives.mdx',
    title: `@skip(if: $with_publisher) with ${withPublisher}`,
    query: `query getArticles($with_publisher: Boolean!) {
  articles {
    title
    publisher @skip(if: $with_publisher)
  }
}`,
    variables: { with_publisher: withPublisher },
    expected: async () => ({ articles: await list(withPublisher ? 'SELECT title FROM articles' : 'SELECT title, publisher FROM articles') }),
  })),
];

interface KnownGap {
  doc: string;
  /** What the query uses that Plinth does not serve, and why. */
  reason: string;
  query: string;
  variables?: Record<string, unknown>;
  /** The validation error that refuses it. */
  error: RegExp;
}

/** Documented queries Plinth refuses: each must be a clear validation error naming what is missing. */
const KNOWN_GAPS: KnownGap[] = [
  {
    doc: 'simple-object-queries.mdx',
    reason: 'the path argument of json/jsonb columns (a value at a JSON path) is not generated',
    query: `query {
  authors_by_pk(id: 1) {
    id
    name
    address
    city: address(path: "$.city")
    phone: address(path: "$.phone_numbers.[0]")
  }
}`,
    error: /Unknown argument "path" on field "authors\.address"/,
  },
  {
    doc: 'query-filters.mdx',
    reason: '_cast (jsonb to String) is not generated in the comparison types',
    query: `query get_authors_in_bengaluru {
  authors(
    where: {
      address: {_cast: {String: {_ilike: "%bengaluru%"}}}
    }
  ) {
    id
    name
    address
  }
}`,
    error: /"_cast" is not defined by type "jsonb_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx',
    reason: 'PostGIS (geography, geometry and _cast between them): the test database has no PostGIS, and Plinth generates no spatial operators',
    query: `query cities_near($point: geography!, $distance: Float!) {
  cities(
    where: {location: {
      _cast: {geography: {
        _st_d_within: {from: $point, distance: $distance}
      }}
    }}
  ) {
    name
  }
}`,
    variables: { point: { type: 'Point', coordinates: [1, 50] }, distance: 1000000 },
    error: /Unknown type "geography"/,
  },
  {
    doc: 'query-filters.mdx',
    reason: 'PostGIS: no geometry type nor _cast',
    query: `query cities_inside($polygon: geometry) {
  cities(
    where: {location: {
      _cast: {geometry: {
        _st_within: $polygon
      }}
    }}
  ) {
    name
  }
}`,
    error: /Unknown type "geometry"/,
  },
  {
    doc: 'query-filters.mdx',
    reason: 'PostGIS: _st_within',
    query: `query geom_table($polygon: geometry){
  geom_table(
    where: {geom_col: {_st_within: $polygon}}
  ){
    id
    geom_col
  }
}`,
    error: /Unknown type "geometry"/,
  },
  {
    doc: 'query-filters.mdx (and filters/postgis-operators.mdx)',
    reason: 'PostGIS: _st_d_within',
    query: `query geom_table($point: geometry){
  geom_table(
    where: {geom_col: {_st_d_within: {distance: 3, from: $point}}}
  ){
    id
    geom_col
  }
}`,
    error: /"_st_d_within" is not defined by type "point_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/postgis-operators.mdx)',
    reason: 'PostGIS: _st_3d_d_within',
    query: `query geom_table($point: geometry){
  geom_table(
    where: {geom_col: {_st_3d_d_within: {distance: 3, from: $point}}}
  ){
    id
    geom_col
  }
}`,
    error: /"_st_3d_d_within" is not defined by type "point_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/postgis-operators.mdx)',
    reason: 'PostGIS: _st_3d_intersects (the page also uses $polygon without declaring it, which Hasura refuses too)',
    query: `query geom_table($point: geometry){
  geom_table(
    where: {geom_col: {_st_3d_intersects: $polygon}}
  ){
    id
    geom_col
  }
}`,
    error: /Variable "\$polygon" is not defined/,
  },
  {
    doc: 'query-filters.mdx (and filters/postgis-operators.mdx)',
    reason: 'PostGIS raster: _st_intersects_rast',
    query: `query getIntersectingValues ($rast: raster){
  dummy_rast(where: {rast: {_st_intersects_rast: $rast}}){
    rid
    rast
  }
}`,
    error: /Unknown type "raster"/,
  },
  {
    doc: 'query-filters.mdx (and filters/postgis-operators.mdx)',
    reason: 'PostGIS raster: _st_intersects_geom_nband',
    query: `query getIntersectingValues ($point: geometry!){
  dummy_rast(where: {rast: {_st_intersects_geom_nband: {geommin: $point}}}){
    rid
    rast
  }
}`,
    error: /"_st_intersects_geom_nband" is not defined by type "bytea_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/postgis-operators.mdx)',
    reason: 'PostGIS raster: _st_intersects_nband_geom',
    query: `query getIntersectingValues ($point: geometry!){
  dummy_rast(where: {rast: {_st_intersects_nband_geom: {nband: 5 geommin: $point}}}){
    rid
    rast
  }
}`,
    error: /"_st_intersects_nband_geom" is not defined by type "bytea_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/ltree-operators.mdx)',
    reason: 'ltree operators: an ltree column gets only the generic comparisons',
    query: `query {
  tree (
    where: {path: {_ancestor: "Tree.Collections.Pictures.Astronomy.Astronauts"}}
  ) {
    path
  }
}`,
    error: /"_ancestor" is not defined by type "ltree_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/ltree-operators.mdx)',
    reason: 'ltree operators: _matches_any',
    query: `query {
  tree (
    where: {path: {_matches_any: ["*.Pictures.*", "*.Hobbies.*"]}}
  ) {
    path
  }
}`,
    error: /"_matches_any" is not defined by type "ltree_comparison_exp"/,
  },
  {
    doc: 'query-filters.mdx',
    reason: 'computed fields (SQL functions as fields) are not tracked',
    query: `query {
  author (where: {full_name: {_ilike: "%bob%"}}){
    id
    first_name
    last_name
  }
}`,
    error: /"full_name" is not defined by type "author_bool_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/using-computed-fields.mdx)',
    reason: 'computed fields: a scalar computed field in where',
    query: `query {
  student(where: {total_marks: {_gte: 80}}){
    roll_no
    name
  }
}`,
    error: /"total_marks" is not defined by type "student_bool_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/using-computed-fields.mdx)',
    reason: 'computed fields: a table computed field in where',
    query: `query {
  author(where: {get_published_articles: {type: {_eq: "medicine"}}}){
    id
    name
  }
}`,
    error: /"get_published_articles" is not defined by type "author_bool_exp"/,
  },
  {
    doc: 'query-filters.mdx (and filters/using-computed-fields.mdx)',
    reason: 'computed fields: the aggregate of a table computed field in where',
    query: `query {
  author(where: {get_published_articles_aggregate: {count: {_gte: 10}}}){
    id
    name
  }
}`,
    error: /"get_published_articles_aggregate" is not defined by type "author_bool_exp"/,
  },
  {
    doc: 'sorting.mdx',
    reason: 'computed fields: ordering by a scalar computed field',
    query: `query {
  student(order_by: {total_marks: desc}){
    id
    name
    total_marks
    physics
    chemistry
    maths
  }
}`,
    error: /"total_marks" is not defined by type "student_order_by"/,
  },
  {
    doc: 'sorting.mdx',
    reason: 'computed fields: ordering by the aggregate of a table computed field',
    query: `query{
  author(order_by: {get_articles_aggregate: {count: desc}}){
    id
    name
    get_articles{
      id
      title
      content
    }
  }
}`,
    error: /"get_articles_aggregate" is not defined by type "author_order_by"/,
  },
  {
    doc: 'query-filters.mdx (and filters/using-nested-objects.mdx)',
    reason: 'aggregation predicates (<relationship>_aggregate in a boolean expression) are not generated',
    query: `query {
  restaurant (
    limit: 3,
    where: {
      _and: [
        {
          reviews_aggregate: {
            average: {
              arguments: "rating",
              predicate: { _gt: 5 }
            }
          }
        },
        {
          reviews_aggregate: {
            count: {
              arguments: ["reviewer"],
              distinct: true,
              predicate: { _gt: 10 }
            }
          }
        }
      ]
    }
  )
  {
    name
  }
}`,
    error: /"reviews_aggregate" is not defined by type "restaurant_bool_exp"/,
  },
  {
    doc: 'filters/jsonb-operators.mdx',
    reason: '_jsonb_path_exists (SQL/JSON path, @?) is not generated',
    query: `query get_large_orders {
  orders(
    where: {
      items: {
        _jsonb_path_exists: "$[*] ? (@.quantity > 5)"
      }
    }
  ) {
    id
    items
  }
}`,
    error: /"_jsonb_path_exists" is not defined by type "jsonb_comparison_exp"/,
  },
  {
    doc: 'filters/jsonb-operators.mdx',
    reason: '_jsonb_path_match (SQL/JSON path predicate, @@) is not generated',
    query: `query get_affordable_products {
  products(
    where: {
      metadata: {
        _jsonb_path_match: "$.price < 50"
      }
    }
  ) {
    id
    name
    metadata
  }
}`,
    error: /"_jsonb_path_match" is not defined by type "jsonb_comparison_exp"/,
  },
  {
    doc: 'filters/jsonb-operators.mdx',
    reason: "the page's example is not valid in Hasura either: _has_keys_any is a jsonb column's operator, not a field of a table's boolean expression",
    query: `query {
  user {
    id
    name
    permissions(where: {_has_keys_any: ["admin", "editor"]}) {
      id
      name
    }
  }
}`,
    error: /"_has_keys_any" is not defined by type "permissions_bool_exp"/,
  },
  {
    doc: 'filters/jsonb-operators.mdx',
    reason:
      "the page's example is not valid in Hasura either: a list root field takes no id argument, a jsonb column has no subfields, _has_keys_all is no field",
    query: `query {
  user(id: "123") {
    name
    address {
      street
      city
      state
      zip
      phone
    }
    hasAllAddressFields: address _has_keys_all(keys: ["street", "city", "state", "zip"])
  }
}`,
    error: /Unknown argument "id" on field "\w+\.user"/,
  },
];

const isRow = (value: unknown): value is Row => typeof value === 'object' && value !== null && !Array.isArray(value);
const json = (value: unknown) => JSON.stringify(value);

/**
 * Where `actual` differs from `expected` (undefined when it does not). Lists compare as sets,
 * unless `ordered` gives their sort key (then the keys must come in the expected order) or
 * `limited` their limit (then any expected rows, as many as the limit lets through).
 */
function difference(actual: unknown, expected: unknown, path: string, query: DocQuery): string | undefined {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${path}: ${json(actual)} is not a list`;
    const limit = query.limited?.[path];
    const length = limit ? Math.max(0, Math.min(limit.limit, expected.length - (limit.offset ?? 0))) : expected.length;
    if (actual.length !== length) return `${path}: ${actual.length} rows where ${length} were expected`;
    const key = query.ordered?.[path];
    if (key && json(actual.map((row: Row) => key(row))) !== json(expected.map((row: Row) => key(row))))
      return `${path}: ordered ${json(actual.map((row: Row) => key(row)))}, expected ${json(expected.map((row: Row) => key(row)))}`;
    const pool = [...expected];
    for (const item of actual) {
      const index = pool.findIndex((candidate) => difference(item, candidate, path, query) === undefined);
      if (index < 0) return `${path}: ${json(item)} is none of the expected ${json(pool)}`;
      pool.splice(index, 1);
    }
    return undefined;
  }
  if (isRow(expected)) {
    if (!isRow(actual)) return `${path}: ${json(actual)} is not an object`;
    if (json(Object.keys(actual).sort()) !== json(Object.keys(expected).sort()))
      return `${path}: fields ${json(Object.keys(actual))}, expected ${json(Object.keys(expected))}`;
    for (const field of Object.keys(expected)) {
      const found = difference(actual[field], expected[field], path ? `${path}.${field}` : field, query);
      if (found) return found;
    }
    return undefined;
  }
  return json(actual) === json(expected) ? undefined : `${path}: ${json(actual)}, expected ${json(expected)}`;
}

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(SCHEMA);
  await server.database.query(SEED);
  expect(await metadataRequest(server.url, { type: 'bulk', args: TRACKING })).toEqual({ status: 200, body: TRACKING.map(() => ({ message: 'success' })) });
  oracle = new pg.Client({ connectionString: server.database.url });
  await oracle.connect();
});

afterAll(async () => {
  await oracle?.end();
  await server?.close();
});

describe("queries copied from Hasura's documentation run unchanged, as hand-written SQL answers them", () => {
  it('covers at least 40 documented queries', () => {
    expect(new Set(DOC_QUERIES.map((query) => query.query + json(query.variables))).size).toBe(DOC_QUERIES.length);
    expect(DOC_QUERIES.length).toBeGreaterThanOrEqual(40);
  });

  for (const docQuery of DOC_QUERIES) {
    it(`${docQuery.doc}: ${docQuery.title}`, async () => {
      const response = await postGraphQL(server.graphqlUrl, { query: docQuery.query, variables: docQuery.variables }, asAdmin);
      expect(response.body.errors).toBeUndefined();
      expect(response.status).toBe(200);
      const expected = await docQuery.expected();
      // The seeded rows must make the query select something, or the comparison proves little.
      if (!docQuery.selectsNothing) expect(json(expected)).not.toMatch(/^\{"\w+":\[\]\}$/);
      expect(difference(response.body.data, expected, '', docQuery)).toBeUndefined();
    });
  }
});

describe('documented queries Plinth does not serve yet are refused as validation errors, never a 500', () => {
  for (const gap of KNOWN_GAPS) {
    it(`${gap.doc}: ${gap.reason}`, async () => {
      const response = await postGraphQL(server.graphqlUrl, { query: gap.query, variables: gap.variables }, asAdmin);
      expect(response.status).toBeLessThan(500);
      expect(response.body.data).toBeUndefined();
      const errors = response.body.errors ?? [];
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.every((error) => error.extensions?.code === 'GRAPHQL_VALIDATION_FAILED')).toBe(true);
      expect(errors.map((error) => error.message)).toContainEqual(expect.stringMatching(gap.error));
    });
  }
});
