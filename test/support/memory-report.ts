/**
 * Preloaded into a server process (`node --require`): on SIGUSR2 it writes one JSON line to
 * stdout with the packages the process has loaded and the size of V8's young generation, for
 * tests of what a server holds in memory.
 */
import v8 from 'node:v8';

export interface MemoryReport {
  packages: string[];
  newSpaceBytes: number;
}

const PACKAGE = /node_modules\/((?:@[^/]+\/)?[^/]+)\//;

process.on('SIGUSR2', () => {
  const packages = new Set(Object.keys(require.cache).flatMap((file) => PACKAGE.exec(file)?.[1] ?? []));
  const newSpace = v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
  const report: MemoryReport = { packages: [...packages].sort(), newSpaceBytes: newSpace?.space_size ?? 0 };
  process.stdout.write(`${JSON.stringify({ memoryReport: report })}\n`);
});
