import { collectGarbage } from '../../src/platform/idle-collection';

/** The heap bytes still in use after `work` (garbage collected before and after): what it left behind. */
export async function heapLeftBehind(work: () => unknown): Promise<number> {
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  await work();
  collectGarbage();
  return process.memoryUsage().heapUsed - before;
}
