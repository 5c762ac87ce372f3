import { AjvCompiler } from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;
type RouteSchema = { schema: unknown };

/**
 * Route schemas compiled once per process, not once per Fastify instance: compiling every route's
 * validators (Ajv) and serializers (fast-json-stringify) was more than half of a server's start-up
 * CPU, and a process that starts several servers (tests, the CLI's commands) compiled the same
 * schemas each time. The compiled functions are kept by the schema's JSON text and the shared
 * schemas' (so a route built anew with equal schemas finds them): a bounded set, the routes'.
 * A schema holding a function (a custom keyword) is compiled each time, as Fastify would.
 */
export const sharedSchemaCompilers: CompilersFactory = {
  buildValidator: compiledOnce(AjvCompiler() as (externals: unknown, options: unknown) => (route: RouteSchema) => unknown),
  buildSerializer: compiledOnce(SerializerSelector() as (externals: unknown, options: unknown) => (route: RouteSchema) => unknown),
} as CompilersFactory;

function compiledOnce<Compiled>(
  factory: (externals: unknown, options: unknown) => (route: RouteSchema) => Compiled,
): (externals: unknown, options: unknown) => (route: RouteSchema) => Compiled {
  const compiled = new Map<string, Compiled>();
  return (externals, options) => {
    const compile = factory(externals, options);
    const context = `${jsonKey(externals) ?? ''}\n${jsonKey(options) ?? ''}\n`;
    return (route) => {
      const schemaKey = jsonKey(route.schema);
      if (schemaKey === undefined) return compile(route);
      const key = context + schemaKey;
      let found = compiled.get(key);
      if (found === undefined) compiled.set(key, (found = compile(route)));
      return found;
    };
  };
}

/** The JSON text of a value, or undefined when it holds a function (which JSON would drop). */
function jsonKey(value: unknown): string | undefined {
  let holdsFunction = false;
  const text = JSON.stringify(value, (_key, inner: unknown) => {
    if (typeof inner === 'function') holdsFunction = true;
    return inner;
  });
  return holdsFunction ? undefined : text;
}
