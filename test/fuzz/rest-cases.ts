import fc from 'fast-check';
import type { RouteOptions } from 'fastify';
import { anyJson, nastyNumber, nastyString } from './values';

/** What the fuzzer needs of a registered route. */
export type RouteSummary = Pick<RouteOptions, 'method' | 'url' | 'schema'>;

/** One request to a REST route. */
export interface RestCase {
  kind: 'rest';
  method: string;
  path: string;
  credentials: string;
  headers: Record<string, string>;
  /** Sent as-is when a string, as JSON otherwise; none when undefined. */
  body: unknown;
  contentType?: string;
}

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
};

/** A value for a JSON schema: mostly of its shape, sometimes wrong. */
function schemaValue(schema: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 4) return anyJson;
  const shaped = (): fc.Arbitrary<unknown> => {
    if (schema.const !== undefined) return fc.constant(schema.const);
    if (schema.enum) return fc.constantFrom(...schema.enum);
    const choices = schema.anyOf ?? schema.oneOf;
    if (choices?.length) return fc.oneof(...choices.map((choice) => schemaValue(choice, depth + 1)));
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    switch (type) {
      case 'object': {
        const fields = Object.fromEntries(Object.entries(schema.properties ?? {}).map(([name, property]) => [name, schemaValue(property, depth + 1)]));
        return fc
          .tuple(fc.record(fields, { requiredKeys: [] }), fc.dictionary(nastyString, anyJson, { maxKeys: 2 }))
          .map(([known, extra]) => ({ ...extra, ...known }));
      }
      case 'array':
        return fc.array(schemaValue(schema.items, depth + 1), { maxLength: 5 });
      case 'string':
        return nastyString;
      case 'integer':
      case 'number':
        return nastyNumber;
      case 'boolean':
        return fc.boolean();
      default:
        return anyJson;
    }
  };
  return fc.oneof({ weight: 6, arbitrary: shaped() }, { weight: 1, arbitrary: anyJson });
}

/**
 * Percent-encodes text for a URL; a lone surrogate, which has no UTF-8 form, becomes the bytes
 * of its WTF-8 form (ED A0 80), which is invalid UTF-8: the server must cope with it too.
 */
function encodeSegment(text: string): string {
  return Array.from(text, (char) => {
    try {
      return encodeURIComponent(char);
    } catch {
      return '%ED%A0%80';
    }
  }).join('');
}

/**
 * Header values stay within what Node's HTTP parser reads (16 KiB for all headers): past it the
 * server answers 431 and resets a connection still sending its body, which is Node's, not ours.
 */
const MAX_HEADER_VALUE = 4096;
/** The same for the request line: a path segment, cut (perhaps inside an escape) to this length. */
const MAX_PATH_SEGMENT = 4096;

const BROKEN_BODIES = ['{', '{"a":', 'null', '[]', '""', '{"__proto__": {"x": 1}}', '\u0000', '{"a": "\\ud800"}', 'x'.repeat(2_000_000)];

/** Requests to every registered route (path, query and body from its schemas), and to unknown paths. */
export function restCases(routes: readonly RouteSummary[], credentials: fc.Arbitrary<string>, skip: (url: string) => boolean): fc.Arbitrary<RestCase> {
  const perRoute = routes
    .filter((route) => !skip(route.url))
    .flatMap((route) => (Array.isArray(route.method) ? route.method : [route.method]).map((method) => ({ route, method: String(method) })))
    .map(({ route, method }) => {
      const schema = (route.schema ?? {}) as { body?: JsonSchema; querystring?: JsonSchema; params?: JsonSchema };
      const segments = route.url.split('/');
      return fc
        .record({
          params: fc.array(fc.oneof(nastyString, fc.uuid()), { minLength: segments.length, maxLength: segments.length }),
          query: fc.oneof(schemaValue(schema.querystring), fc.dictionary(nastyString, nastyString, { maxKeys: 3 })),
          body: fc.oneof({ weight: 5, arbitrary: schemaValue(schema.body) }, { weight: 1, arbitrary: fc.constantFrom(...BROKEN_BODIES) }),
          credentials,
          contentType: fc.constantFrom(
            undefined,
            'application/json',
            'application/json',
            'text/plain',
            'application/x-www-form-urlencoded',
            'application/json; charset=latin1',
            'multipart/form-data',
          ),
          headers: fc.dictionary(
            fc.constantFrom(
              'x-gql-role',
              'x-gql-user-id',
              'x-gql-session-variables',
              'x-request-id',
              'x-forwarded-for',
              'accept',
              'origin',
              'x-hub-signature-256',
            ),
            nastyString.filter((value) => value.length <= MAX_HEADER_VALUE && /^[\t\x20-\x7e]*$/.test(value)),
            { maxKeys: 3 },
          ),
        })
        .map(({ params, query, body, credentials: who, contentType, headers }): RestCase => {
          const filled = segments
            .map((segment, index) => (segment.startsWith(':') || segment === '*' ? encodeSegment(params[index]).slice(0, MAX_PATH_SEGMENT) : segment))
            .join('/');
          const path = filled.startsWith('/') ? filled : `/${filled}`;
          const search =
            query && typeof query === 'object' && !Array.isArray(query)
              ? new URLSearchParams(
                  Object.entries(query as Record<string, unknown>).map(([key, value]): [string, string] => [
                    key,
                    typeof value === 'string' ? value : (JSON.stringify(value) ?? ''),
                  ]),
                ).toString()
              : '';
          const hasBody = method !== 'GET' && method !== 'HEAD';
          return {
            kind: 'rest',
            method,
            path: search ? `${path}?${search.slice(0, MAX_PATH_SEGMENT)}` : path,
            credentials: who,
            headers,
            body: hasBody ? body : undefined,
            contentType: hasBody ? contentType : undefined,
          };
        });
    });
  const unknown = fc
    .record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
      path: fc
        .oneof(
          nastyString.map((text) => encodeSegment(text).slice(0, MAX_PATH_SEGMENT)),
          fc.webPath(),
        )
        .map((path) => `/${path.replace(/^\/+/, '')}`),
      credentials,
      body: anyJson,
    })
    .map(({ method, path, credentials: who, body }): RestCase => ({
      kind: 'rest',
      method,
      path,
      credentials: who,
      headers: {},
      body: method === 'GET' ? undefined : body,
    }));
  return perRoute.length ? fc.oneof({ weight: 4, arbitrary: fc.oneof(...perRoute) }, { weight: 1, arbitrary: unknown }) : unknown;
}
