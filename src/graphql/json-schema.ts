import { isEnumType, isListType, isNonNullType, isObjectType, isScalarType, type GraphQLOutputType, type GraphQLSchema } from 'graphql';

export type JsonSchema = Record<string, unknown>;

/** The JSON form of the scalars the schema uses (graphql-scalars' among them); others are any JSON. */
const SCALAR_SCHEMAS: Record<string, JsonSchema> = {
  String: { type: 'string' },
  ID: { type: 'string' },
  Int: { type: 'integer' },
  Float: { type: 'number' },
  Boolean: { type: 'boolean' },
  UUID: { type: 'string', format: 'uuid' },
  DateTime: { type: 'string', format: 'date-time' },
  JSONObject: { type: 'object', additionalProperties: true },
};

/**
 * The JSON schema of a GraphQL output type as JSON carries it: non-null fields are required, the
 * others may be null. A type met again below itself becomes any JSON (a recursive type has no
 * finite inline form). Handler routes answer with their action's output type, so their response
 * schema comes from here and cannot drift from the GraphQL type.
 */
export function outputJsonSchema(type: GraphQLOutputType, seen: readonly string[] = []): JsonSchema {
  if (isNonNullType(type)) return withoutNull(outputJsonSchema(type.ofType, seen));
  if (isListType(type)) return nullable({ type: 'array', items: outputJsonSchema(type.ofType, seen) });
  if (isScalarType(type)) return nullable(SCALAR_SCHEMAS[type.name] ?? {});
  if (isEnumType(type)) return nullable({ type: 'string', enum: type.getValues().map((value) => value.name) });
  if (!isObjectType(type) || seen.includes(type.name)) return {};
  const fields = Object.values(type.getFields());
  return nullable({
    type: 'object',
    ...(type.description ? { description: type.description } : {}),
    properties: Object.fromEntries(
      fields.map((field) => {
        const schema = outputJsonSchema(field.type, [...seen, type.name]);
        return [field.name, field.description ? { ...schema, description: field.description } : schema];
      }),
    ),
    required: fields.filter((field) => isNonNullType(field.type)).map((field) => field.name),
  });
}

/** The return type of a root query or mutation field; throws when the schema has no such field. */
export function rootFieldType(schema: GraphQLSchema, fieldName: string): GraphQLOutputType {
  const field = schema.getMutationType()?.getFields()[fieldName] ?? schema.getQueryType()?.getFields()[fieldName];
  if (!field) throw new Error(`the GraphQL schema has no query or mutation named ${fieldName}`);
  return field.type;
}

function nullable(schema: JsonSchema): JsonSchema {
  if (typeof schema.type !== 'string') return schema;
  return { ...schema, type: [schema.type, 'null'] };
}

function withoutNull(schema: JsonSchema): JsonSchema {
  if (!Array.isArray(schema.type)) return schema;
  return { ...schema, type: schema.type[0] };
}
