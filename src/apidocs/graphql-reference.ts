import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  isSpecifiedScalarType,
  isUnionType,
  parse,
  print,
  printType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  type GraphQLType,
} from 'graphql';
import { requires } from '../platform/fastify/security-schemes';

/** An action: its GraphQL operation and the path of its engine-compatible handler route. */
export interface ActionRoute {
  name: string;
  path: string;
}

type OperationKind = 'query' | 'mutation' | 'subscription';

/** Nested objects an example selects before it stops (the whole schema is one click away in GraphiQL). */
const EXAMPLE_DEPTH = 3;

/** Example values of the scalars the schema uses; a scalar not listed gets a string. */
const SCALAR_EXAMPLES: Record<string, unknown> = {
  String: 'string',
  ID: 'id',
  Int: 0,
  Float: 0,
  Boolean: false,
  UUID: '00000000-0000-4000-8000-000000000000',
  DateTime: '2026-01-01T00:00:00.000Z',
  JSONObject: {},
};

/** The request and response shapes of GraphQL over HTTP, as components the GraphQL paths refer to. */
export const GRAPHQL_SCHEMAS = {
  GraphQLRequest: {
    type: 'object',
    required: ['query'],
    properties: {
      query: { type: 'string', description: 'The GraphQL document' },
      variables: { type: ['object', 'null'], description: "Values of the operation's variables" },
      operationName: { type: ['string', 'null'], description: 'Which operation of the document to run' },
    },
  },
  GraphQLResponse: {
    type: 'object',
    properties: {
      data: { type: ['object', 'null'], description: 'The result, shaped like the selection set' },
      errors: { type: 'array', items: { $ref: '#/components/schemas/GraphQLError' } },
    },
  },
  GraphQLError: {
    type: 'object',
    properties: {
      message: { type: 'string' },
      locations: { type: 'array', items: { type: 'object', properties: { line: { type: 'integer' }, column: { type: 'integer' } } } },
      path: { type: 'array', items: { type: ['string', 'integer'] } },
      extensions: {
        type: 'object',
        description: '`code` says what went wrong, such as BAD_USER_INPUT, FORBIDDEN, INVALID_JWT or RATE_LIMITED',
        properties: { code: { type: 'string' } },
      },
    },
    required: ['message'],
  },
};

const GRAPHQL_RESPONSE_CONTENT = {
  'application/graphql-response+json': { schema: { $ref: '#/components/schemas/GraphQLResponse' } },
  'application/json': { schema: { $ref: '#/components/schemas/GraphQLResponse' } },
};

const graphqlError = (description: string) => ({ description, content: GRAPHQL_RESPONSE_CONTENT });

/** Headers an admin-secret caller uses to act as a role and user (the engine's session headers). */
const SESSION_HEADERS = [
  {
    name: 'X-Gql-Role',
    in: 'header',
    required: false,
    schema: { type: 'string' },
    description: "The role to act as: one of the token's allowed roles, or any role with the admin secret",
  },
  { name: 'X-Gql-User-Id', in: 'header', required: false, schema: { type: 'string' }, description: 'With the admin secret: the user to act as' },
];

/**
 * The GraphQL endpoints, documented by hand once (their Fastify route takes any GraphQL body and
 * has no schema of its own): POST for queries and mutations, with one example request per root
 * field for the try-out panel; GET, which shows GraphiQL to browsers; and the WebSocket endpoint
 * for subscriptions. The operations themselves are listed in the `graphql` tag's description;
 * the request and response shapes are GRAPHQL_SCHEMAS.
 */
export function graphqlPaths(endpoint: string, schema: GraphQLSchema): Record<string, unknown> {
  const examples = Object.fromEntries(
    (['query', 'mutation'] as const).flatMap((kind) =>
      rootFields(schema, kind).map((field) => [field.name, { summary: `${kind} ${field.name}`, value: exampleRequest(kind, field) }]),
    ),
  );
  const subscriptions = rootFields(schema, 'subscription').map((field) => `\`${field.name}\``);
  return {
    [endpoint]: {
      get: {
        tags: ['graphql'],
        summary: 'GraphiQL, or a query over GET',
        description:
          'A browser (`Accept: text/html`) gets GraphiQL, the GraphQL explorer, with subscriptions over WebSocket. ' +
          'Other clients may send a query (not a mutation) in the query string, as the GraphQL-over-HTTP specification describes.',
        security: [...requires('bearerAuth', 'adminSecret'), {}],
        parameters: [
          { name: 'query', in: 'query', required: false, schema: { type: 'string' }, description: 'The GraphQL document' },
          { name: 'variables', in: 'query', required: false, schema: { type: 'string' }, description: 'The variables, as JSON' },
          { name: 'operationName', in: 'query', required: false, schema: { type: 'string' } },
          ...SESSION_HEADERS,
        ],
        responses: {
          200: {
            description: 'GraphiQL (text/html) or the result',
            content: { 'text/html': { schema: { type: 'string' } }, ...GRAPHQL_RESPONSE_CONTENT },
          },
          400: graphqlError('A document that does not parse or validate (with application/graphql-response+json)'),
          405: graphqlError('A mutation over GET'),
        },
      },
      post: {
        tags: ['graphql'],
        summary: 'Run a query or mutation',
        description:
          'GraphQL over HTTP. Actions are mutations like any other. Pick an example below for a ready-made request of each ' +
          'query and mutation. With `Accept: application/graphql-response+json` errors before execution are 4xx; with ' +
          '`application/json` they are 200 with `errors`.',
        security: [...requires('bearerAuth', 'adminSecret'), {}],
        parameters: SESSION_HEADERS,
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: { $ref: '#/components/schemas/GraphQLRequest' },
              examples,
            },
          },
        },
        responses: {
          200: { description: 'The result: data, errors, or both', content: GRAPHQL_RESPONSE_CONTENT },
          400: graphqlError('A malformed request, or a document that does not parse or validate'),
          401: graphqlError('A wrong admin secret, or an invalid or expired token'),
          403: graphqlError('The token does not allow the requested role'),
          413: graphqlError('A body over GQL_GRAPHQL_BODY_LIMIT'),
          415: graphqlError('A body that is not application/json in UTF-8'),
          429: graphqlError('Too many requests'),
        },
      },
    },
    [`${endpoint}/subscriptions`]: {
      get: {
        tags: ['graphql'],
        summary: 'Subscriptions (WebSocket)',
        description:
          'A WebSocket speaking graphql-ws (`graphql-transport-ws`). Credentials go in the `connection_init` payload: ' +
          '`{"headers": {"Authorization": "Bearer <JWT>"}}` or the admin secret. Not executable from this page: use ' +
          `GraphiQL (\`GET ${endpoint}\` in a browser) or a graphql-ws client. ` +
          (subscriptions.length ? `Subscriptions: ${subscriptions.join(', ')}.` : 'The schema has no subscriptions.'),
        'x-platform-websocket': true,
        security: [...requires('bearerAuth', 'adminSecret'), {}],
        parameters: [
          { name: 'Upgrade', in: 'header', required: true, schema: { type: 'string', const: 'websocket' } },
          { name: 'Sec-WebSocket-Protocol', in: 'header', required: true, schema: { type: 'string', const: 'graphql-transport-ws' } },
        ],
        responses: {
          101: { description: 'Switching Protocols: the WebSocket is open; the session starts with connection_init' },
        },
      },
    },
  };
}

/**
 * The `graphql` tag's description: every query, mutation and subscription with its arguments,
 * its result and the types they use, printed from the schema, so the reference shows the whole
 * API in one place. Actions name their handler route too.
 */
export function graphqlOperationsMarkdown(schema: GraphQLSchema, endpoint: string, actions: readonly ActionRoute[]): string {
  const sections = (['query', 'mutation', 'subscription'] as const).map((kind) => {
    const fields = rootFields(schema, kind);
    const heading = { query: 'Queries', mutation: 'Mutations', subscription: 'Subscriptions' }[kind];
    if (fields.length === 0) return `## ${heading}\n\nNone.`;
    return [
      `## ${heading}`,
      ...fields.map((field) =>
        operationMarkdown(
          field,
          actions.find((action) => action.name === field.name),
        ),
      ),
    ].join('\n\n');
  });
  return [
    `The GraphQL API at \`${endpoint}\`, generated from its schema. Queries and mutations go to \`POST ${endpoint}\` ` +
      `(its examples hold a request for each); subscriptions to the WebSocket at \`${endpoint}/subscriptions\`. ` +
      `A browser opening \`${endpoint}\` gets GraphiQL.`,
    ...sections,
  ].join('\n\n');
}

function operationMarkdown(field: GraphQLField<unknown, unknown>, action: ActionRoute | undefined): string {
  const args = field.args.map((arg) => `${arg.name}: ${String(arg.type)}`).join(', ');
  const signature = `${field.name}${args ? `(${args})` : ''}: ${String(field.type)}`;
  const types = typesUsedBy(field).map((type) => printType(type));
  return [
    `### ${field.name}`,
    ...(field.description ? [field.description] : []),
    ...(action ? [`An action: its engine-compatible handler is \`POST ${action.path}\`.`] : []),
    ['```graphql', signature, ...types.map((type) => `\n${type}`), '```'].join('\n'),
  ].join('\n\n');
}

/** The named types an operation's arguments and result reach, in the order they are met; built-in scalars left out. */
function typesUsedBy(field: GraphQLField<unknown, unknown>): GraphQLNamedType[] {
  const found: GraphQLNamedType[] = [];
  const queue: GraphQLNamedType[] = [...field.args.map((arg) => getNamedType(arg.type)), getNamedType(field.type)];
  while (queue.length > 0) {
    const type = queue.shift()!;
    if (found.includes(type) || (isScalarType(type) && isSpecifiedScalarType(type))) continue;
    found.push(type);
    if (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type)) {
      for (const child of Object.values(type.getFields())) queue.push(getNamedType(child.type as GraphQLType));
    } else if (isUnionType(type)) {
      queue.push(...type.getTypes());
    }
  }
  return found;
}

function rootFields(schema: GraphQLSchema, kind: OperationKind): GraphQLField<unknown, unknown>[] {
  const root = kind === 'query' ? schema.getQueryType() : kind === 'mutation' ? schema.getMutationType() : schema.getSubscriptionType();
  return root ? Object.values(root.getFields()) : [];
}

/** A ready-to-send request for one root field: every argument a variable, a selection of the result. */
function exampleRequest(kind: OperationKind, field: GraphQLField<unknown, unknown>) {
  const operationName = field.name.charAt(0).toUpperCase() + field.name.slice(1);
  const variables = field.args.map((arg) => `$${arg.name}: ${String(arg.type)}`).join(', ');
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const document = `${kind} ${operationName}${variables ? `(${variables})` : ''} { ${field.name}${args ? `(${args})` : ''} ${selection(field.type, 1)} }`;
  return {
    query: print(parse(document)),
    variables: Object.fromEntries(field.args.map((arg) => [arg.name, exampleValue(arg.type, 0)])),
    operationName,
  };
}

/** The selection set of a result: its leaves, and nested objects down to EXAMPLE_DEPTH. */
function selection(type: GraphQLOutputType, depth: number): string {
  const named = getNamedType(type);
  if (isLeafType(named)) return '';
  if (isUnionType(named)) return '{ __typename }';
  const fields = Object.values((named as GraphQLObjectType).getFields())
    .filter((field) => field.args.every((arg) => !isNonNullType(arg.type)))
    .map((field) => {
      if (isLeafType(getNamedType(field.type))) return field.name;
      return depth < EXAMPLE_DEPTH ? `${field.name} ${selection(field.type, depth + 1)}` : '';
    })
    .filter(Boolean);
  return `{ ${fields.length ? fields.join(' ') : '__typename'} }`;
}

function exampleValue(type: GraphQLInputType, depth: number): unknown {
  if (isNonNullType(type)) return exampleValue(type.ofType, depth);
  if (isListType(type)) return [exampleValue(type.ofType, depth)];
  if (isEnumType(type)) return type.getValues()[0]?.name ?? null;
  if (isInputObjectType(type)) {
    // Optional fields stop at EXAMPLE_DEPTH so that recursive inputs end.
    const fields = Object.values(type.getFields()).filter((field) => isNonNullType(field.type) || depth < EXAMPLE_DEPTH);
    return Object.fromEntries(fields.map((field) => [field.name, exampleValue(field.type, depth + 1)]));
  }
  return SCALAR_EXAMPLES[type.name] ?? 'string';
}
