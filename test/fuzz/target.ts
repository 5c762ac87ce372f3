import fs from 'node:fs';
import { startTestServer, type TestServer } from '../support/server';
import type { FuzzTarget } from './fuzzer';

/** The real server in this process, its error-level log lines kept, as the fuzzer's target. */
export async function startFuzzTarget(): Promise<{ target: FuzzTarget; server: TestServer }> {
  const errorLines: string[] = [];
  const server = await startTestServer(
    // Client mistakes log below error level; only the server's own faults reach these lines.
    { LOG_LEVEL: 'error' },
    { logTo: { write: (line: string) => void errorLines.push(line) } },
  );
  const target: FuzzTarget = {
    url: server.url,
    routes: server.server.app.routeTable,
    errorLines: () => errorLines,
    residentBytes: () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]) * 1024,
  };
  return { target, server };
}
