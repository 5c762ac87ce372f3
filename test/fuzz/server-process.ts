import 'reflect-metadata';
import v8 from 'node:v8';
import { startTestServer } from '../support/server';
import type { RouteSummary } from './rest-cases';

/** Messages between the fuzzer and the server process it starts (test/fuzz/target.ts). */
export type ServerProcessMessage =
  | { type: 'ready'; url: string; routes: RouteSummary[] }
  | { type: 'log'; line: string }
  | { type: 'failed'; error: string }
  | { type: 'heap-snapshot-written'; path: string };

/** Messages from the fuzzer to the server process. */
export type FuzzerMessage = { type: 'stop' } | { type: 'heap-snapshot'; path: string };

const send = (message: ServerProcessMessage) => process.send?.(message);

/**
 * The real server in a process of its own, so that the fuzzer measures the server's memory and
 * nothing of its own. Log lines at error level go to the parent as they are written.
 */
async function main(): Promise<void> {
  // The start-up collection as a deployment has it by default (tests turn it off): its collections after growth give memory back.
  const server = await startTestServer(
    { LOG_LEVEL: 'error', PLINTH_STARTUP_COLLECTION: 'true', ...JSON.parse(process.env.FUZZ_SERVER_ENV ?? '{}') },
    { logTo: { write: (line: string) => void send({ type: 'log', line }) } },
  );
  const routes = server.server.app.routeTable.map(({ method, url, schema }) => ({ method, url, schema }));
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // The process ends whether or not the server closed cleanly.
    void server.close().finally(() => process.exit(0));
  };
  process.on('message', (message: FuzzerMessage) => {
    if (message.type === 'stop') stop();
    // For finding what holds memory (npm run fuzz -- --heap-snapshots DIR); the snapshot collects garbage first.
    else send({ type: 'heap-snapshot-written', path: v8.writeHeapSnapshot(message.path) });
  });
  process.on('disconnect', stop);
  send({ type: 'ready', url: server.url, routes });
}

main().catch((error: unknown) => {
  send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
