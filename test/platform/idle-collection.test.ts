import v8 from 'node:v8';
import { collectGarbage, IdleCollector, type IdleCollectorOptions, type LoopTimes } from '../../src/platform/idle-collection';

const CHECK_MS = 250;
/** Stands for V8's 5 s of little allocation: a quiet spell's second collection comes two checks after its first. */
const YOUNG_GENERATION_QUIET_MS = 2 * CHECK_MS;
const PER_SPELL = 2;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An event loop's clock the test moves: busy or idle time, as performance.eventLoopUtilization() counts it. */
class LoopClock {
  active = 0;
  idle = 0;
  readonly times = (): LoopTimes => ({ active: this.active, idle: this.idle });
  /** One check interval with this share of it busy. */
  interval(busyShare: number): void {
    this.active += CHECK_MS * busyShare;
    this.idle += CHECK_MS * (1 - busyShare);
  }
}

/** A collector on `loop`, counting its collections; `collect` runs inside each. */
function collectorOn(
  loop: LoopClock,
  collect: () => void = () => undefined,
  options: Pick<IdleCollectorOptions, 'startUpOnly' | 'grownBy' | 'pressureBy' | 'pressureChurn' | 'churn' | 'laterSpellQuietMs' | 'residentBytes'> = {},
) {
  const counted = { collections: 0 };
  const collector = new IdleCollector(CHECK_MS, {
    ...options,
    collect: () => (counted.collections++, collect()),
    youngGenerationQuietMs: YOUNG_GENERATION_QUIET_MS,
    loopTimes: loop.times,
  });
  /** `count` checks, each after an interval with `busyShare` of it busy. */
  const checks = (count: number, busyShare: number) => {
    for (let check = 0; check < count; check++) {
      loop.interval(busyShare);
      collector.check();
    }
  };
  return { collector, counted, checks };
}

describe('IdleCollector', () => {
  it('collects at the first quiet check after the start-up and again a young generation’s quiet time later, then no more while it stays quiet', () => {
    const { counted, checks } = collectorOn(new LoopClock());
    checks(1, 0);
    expect(counted.collections).toBe(1);
    checks(1, 0);
    expect(counted.collections).toBe(1);
    checks(1, 0);
    expect(counted.collections).toBe(2);
    checks(6, 0.04);
    expect(counted.collections).toBe(PER_SPELL);
  });

  it('collects again after a busy spell, not during it', () => {
    const { counted, checks } = collectorOn(new LoopClock());
    checks(5, 0);
    expect(counted.collections).toBe(PER_SPELL);
    // Busy through several checks (at 6%, just over the quiet mark): none collects.
    checks(4, 0.06);
    expect(counted.collections).toBe(PER_SPELL);
    checks(8, 0);
    expect(counted.collections).toBe(2 * PER_SPELL);
  });

  it('does not count its own collections as activity (a slow collection does not start another spell)', () => {
    const loop = new LoopClock();
    // Each collection takes half an interval: as activity, it would keep the collector collecting forever.
    const { counted, checks } = collectorOn(loop, () => (loop.active += CHECK_MS / 2));
    checks(10, 0);
    expect(counted.collections).toBe(PER_SPELL);
  });

  it('start-up only: collects twice in all (a busy spell between the two delays the second, adds none)', () => {
    const { counted, checks } = collectorOn(new LoopClock(), undefined, { startUpOnly: true });
    checks(1, 0);
    checks(2, 0.06);
    expect(counted.collections).toBe(1);
    checks(5, 0);
    expect(counted.collections).toBe(2);
    checks(4, 0.06);
    checks(8, 0);
    expect(counted.collections).toBe(2);
  });

  it('start-up, then when grown: a later quiet spell collects only when resident memory is past grownBy times its size after the start-up', () => {
    let resident = 100;
    const { counted, checks } = collectorOn(new LoopClock(), undefined, { startUpOnly: true, grownBy: 1.25, residentBytes: () => resident });
    checks(8, 0);
    expect(counted.collections).toBe(PER_SPELL);
    // A burst that leaves the process 20% larger: its quiet spell pays nothing.
    resident = 120;
    checks(3, 0.5);
    checks(8, 0);
    expect(counted.collections).toBe(PER_SPELL);
    // One that leaves it 50% larger (a fuzz run's caches and garbage) is collected, once per spell.
    resident = 150;
    checks(3, 0.5);
    checks(8, 0);
    expect(counted.collections).toBe(2 * PER_SPELL);
    checks(8, 0);
    expect(counted.collections).toBe(2 * PER_SPELL);
  });

  it('start-up, then when grown: a later spell collects only once it has been quiet for laterSpellQuietMs (bursts with short gaps pay nothing)', () => {
    let resident = 100;
    const { counted, checks } = collectorOn(new LoopClock(), undefined, {
      startUpOnly: true,
      grownBy: 1.25,
      laterSpellQuietMs: 6 * CHECK_MS,
      residentBytes: () => resident,
    });
    // The start-up's spell does not wait: its first quiet check collects.
    checks(1, 0);
    expect(counted.collections).toBe(1);
    checks(8, 0);
    expect(counted.collections).toBe(PER_SPELL);
    // Load in turns (a benchmark's, or bursty traffic) that leaves the process 50% larger: gaps of
    // five quiet checks between the bursts are not a quiet spell.
    resident = 150;
    for (let burst = 0; burst < 10; burst++) {
      checks(2, 0.5);
      checks(5, 0);
    }
    expect(counted.collections).toBe(PER_SPELL);
    // Quiet on: the sixth quiet check collects, the young generation's quiet time later the second.
    checks(1, 0);
    expect(counted.collections).toBe(PER_SPELL + 1);
    checks(3, 0);
    expect(counted.collections).toBe(2 * PER_SPELL);
    checks(20, 0);
    expect(counted.collections).toBe(2 * PER_SPELL);
  });

  it('under pressure: a busy process past pressureBy times its idle size collects, every 10 s at most, while its text-keyed caches take in new entries', () => {
    let resident = 100;
    let takenIn = 0;
    const { counted, checks } = collectorOn(new LoopClock(), undefined, {
      startUpOnly: true,
      grownBy: 1.25,
      pressureBy: 1.75,
      pressureChurn: 100,
      churn: () => takenIn,
      residentBytes: () => resident,
    });
    checks(8, 0);
    expect(counted.collections).toBe(PER_SPELL);
    // Busy at 1.5 times: nothing while the load lasts.
    resident = 150;
    checks(80, 0.5);
    expect(counted.collections).toBe(PER_SPELL);
    // Busy at twice, on texts it has mostly seen (ordinary load, which V8's own collections bound): nothing.
    resident = 200;
    for (let check = 0; check < 99; check++) {
      takenIn += 1;
      checks(1, 0.5);
    }
    expect(counted.collections).toBe(PER_SPELL);
    // The caches take in new texts (hostile input): one collection, then, while they go on taking
    // them in, one per 10 s of loop time (40 checks of 250 ms).
    takenIn += 1;
    checks(1, 0.5);
    expect(counted.collections).toBe(PER_SPELL + 1);
    for (let check = 0; check < 38; check++) {
      takenIn += 10;
      checks(1, 0.5);
    }
    expect(counted.collections).toBe(PER_SPELL + 1);
    checks(2, 0.5);
    expect(counted.collections).toBe(PER_SPELL + 2);
    // The new texts stop: so do the collections.
    checks(200, 0.5);
    expect(counted.collections).toBe(PER_SPELL + 2);
  });

  it('does not take what a collection sets off for activity (the window after it would start the spell over)', () => {
    const loop = new LoopClock();
    let aftermath = false;
    const { collector, counted } = collectorOn(loop, () => (aftermath = true));
    for (let check = 0; check < 12; check++) {
      // The interval after each collection is half busy (finalisers, weak callbacks), the others idle.
      loop.interval(aftermath ? 0.5 : 0);
      aftermath = false;
      collector.check();
    }
    expect(counted.collections).toBe(PER_SPELL);
  });

  it('start-up only: its timer stops once the start-up spell is done', async () => {
    const loop = new LoopClock();
    // An idle loop's clock: time passes, none of it busy.
    const ticking = setInterval(() => (loop.idle += CHECK_MS / 5), CHECK_MS / 5);
    const { collector, counted } = collectorOn(loop, undefined, { startUpOnly: true });
    try {
      collector.start();
      const deadline = Date.now() + 10_000;
      while (counted.collections < PER_SPELL && Date.now() < deadline) await sleep(CHECK_MS / 5);
      expect(counted.collections).toBe(PER_SPELL);
      await sleep(CHECK_MS * 4);
      expect(counted.collections).toBe(PER_SPELL);
    } finally {
      clearInterval(ticking);
      collector.stop();
    }
  });

  it('checks on its own timer once started, and collects nothing once stopped', async () => {
    const { collector, counted } = collectorOn(new LoopClock());
    collector.start();
    // The loop's clock stands still, so each check finds it quiet; timers run late on a loaded machine.
    const deadline = Date.now() + 10_000;
    while (counted.collections === 0 && Date.now() < deadline) await sleep(CHECK_MS / 5);
    expect(counted.collections).toBeGreaterThan(0);
    collector.stop();
    const atStop = counted.collections;
    await sleep(CHECK_MS * 3);
    expect(counted.collections).toBe(atStop);
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
