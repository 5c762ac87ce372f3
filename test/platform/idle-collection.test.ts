import v8 from 'node:v8';
import { collectGarbage, IdleCollector } from '../../src/platform/idle-collection';

const CHECK_MS = 250;
/** Stands for V8's 5 s of little allocation: two checks, so a quiet spell has three collections. */
const YOUNG_GENERATION_QUIET_MS = 2 * CHECK_MS;
const PER_SPELL = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Keeps the event loop busy (synchronous work) for `ms`. */
function spin(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

describe('IdleCollector', () => {
  let collector: IdleCollector | undefined;
  afterEach(() => collector?.stop());

  it('collects at the quiet checks after the start-up, up to a young generation’s quiet time, then no more while it stays quiet', async () => {
    let collections = 0;
    collector = new IdleCollector(CHECK_MS, () => collections++, YOUNG_GENERATION_QUIET_MS);
    collector.start();
    await sleep(CHECK_MS * 8);
    expect(collections).toBe(PER_SPELL);
  });

  it('collects again after a busy spell, not during it', async () => {
    let collections = 0;
    collector = new IdleCollector(CHECK_MS, () => collections++, YOUNG_GENERATION_QUIET_MS);
    collector.start();
    await sleep(CHECK_MS * 6);
    expect(collections).toBe(PER_SPELL);
    // Busy through several checks: each check saw activity, so none collects.
    for (let check = 0; check < 4; check++) {
      spin(CHECK_MS * 0.8);
      await sleep(CHECK_MS * 0.2);
    }
    const duringActivity = collections;
    await sleep(CHECK_MS * 8);
    expect(duringActivity).toBe(PER_SPELL);
    expect(collections).toBe(2 * PER_SPELL);
  });

  it('does not count its own collections as activity (a slow collection does not start another spell)', async () => {
    let collections = 0;
    // Each collection takes half a check: as activity, it would keep the collector collecting forever.
    collector = new IdleCollector(
      CHECK_MS,
      () => {
        collections++;
        spin(CHECK_MS / 2);
      },
      YOUNG_GENERATION_QUIET_MS,
    );
    collector.start();
    await sleep(CHECK_MS * 10);
    expect(collections).toBe(PER_SPELL);
  });

  it('collects nothing once stopped', async () => {
    let collections = 0;
    collector = new IdleCollector(CHECK_MS, () => collections++, YOUNG_GENERATION_QUIET_MS);
    collector.start();
    collector.stop();
    await sleep(CHECK_MS * 4);
    expect(collections).toBe(0);
  });
});

describe('collectGarbage', () => {
  it('runs a full collection: an object only weakly held is gone after it', async () => {
    let target: object | undefined = { payload: new Array(1000).fill('x') };
    const reference = new WeakRef(target);
    target = undefined;
    // A WeakRef holds its target until the end of the job that made it.
    await new Promise((resolve) => setImmediate(resolve));
    collectGarbage();
    expect(reference.deref()).toBeUndefined();
  });

  it('gives a grown young generation back when the collections follow a few seconds of little allocation', async () => {
    const newSpace = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')!.space_size;
    // Short-lived allocations whose survivors make V8 grow its semi-spaces.
    let kept: unknown[][] = [];
    for (let round = 0; round < 3000; round++) {
      kept.push(Array.from({ length: 500 }, (_, index) => ({ index })));
      if (kept.length > 200) kept = kept.slice(100);
    }
    kept = [];
    const grown = newSpace();
    collectGarbage();
    await sleep(5500);
    collectGarbage();
    expect(grown).toBeGreaterThanOrEqual(8 * 1024 * 1024);
    expect(newSpace()).toBeLessThan(grown / 2);
  }, 20_000);
});
