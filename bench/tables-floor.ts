import http from 'node:http';
import pg from 'pg';
import { listen, type BenchServer } from './processes';

/** A statement as Plinth's compiler emitted it, with the values it runs with. */
export interface FloorStatement {
  text: string;
  values: unknown[];
}

const JSON_OID = 114;

/**
 * Baseline (a) of the tables benchmark, the floor: a bare node:http server that drains the
 * request, runs the statement Plinth's compiler emits for the query through pg and writes the
 * JSON PostgreSQL built as it came (pg hands `json` over as text, never parsed). It parses no
 * GraphQL and checks no credential: the statement is chosen by which credential the request
 * carries (a bearer token: `user`'s, else the admin's), its session values already bound.
 */
export async function startFloor(
  databaseUrl: string,
  poolSize: number,
  rootField: string,
  statements: { admin: FloorStatement; user: FloorStatement },
): Promise<BenchServer> {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: poolSize,
    application_name: 'plinth-bench-floor',
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === JSON_OID ? (text: string) => text : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  const prefix = `{"data":{${JSON.stringify(rootField)}:`;
  const handle = async (request: http.IncomingMessage, response: http.ServerResponse) => {
    for await (const chunk of request) void chunk;
    const statement = request.headers.authorization ? statements.user : statements.admin;
    const result = await pool.query<{ j: string }>(statement.text, statement.values);
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(`${prefix}${result.rows[0].j}}}`);
  };
  const server = await listen(
    http.createServer((request, response) => {
      handle(request, response).catch((error: unknown) => {
        response.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ message: (error as Error).message }] }));
      });
    }),
  );
  return { url: server.url, close: () => server.close().finally(() => pool.end()) };
}
