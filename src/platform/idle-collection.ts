import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

let fullCollection: (() => void) | undefined;

/** V8's gc() (a full collection), which Node exposes only with --expose-gc: the flag is set for one new context, which hands it over. */
export function collectGarbage(): void {
  if (!fullCollection) {
    v8.setFlagsFromString('--expose-gc');
    fullCollection = vm.runInNewContext('gc') as () => void;
    v8.setFlagsFromString('--no-expose-gc');
  }
  fullCollection();
}

/** A check whose event loop was busier than this (its own collections aside) counts as activity; one below it as quiet. */
const QUIET_UTILIZATION = 0.02;
/**
 * V8 shrinks its young generation (grown to two 16 MB semi-spaces by any burst of allocation) only
 * in a full collection that follows this long of little allocation (its throughput window).
 */
const YOUNG_GENERATION_QUIET_MS = 5000;

/**
 * Gives memory back once the process goes quiet. V8 collects when allocation fills its spaces, so
 * after a burst of requests (or the start-up) the old generation keeps its garbage and the young
 * generation its full size until the next burst, which may be hours away: after the GraphQL
 * benchmark's load the server idled at 180-250 MB resident with 125 MB of it live. Every
 * `intervalMs` it reads how busy the event loop was; after activity, the quiet checks of the next
 * five seconds and more each ask for a full collection (two at the default 5 s: tens of
 * milliseconds each, when nothing waits for the loop).
 * Steady traffic never pays for one: a check that saw activity collects nothing. The next burst
 * does pay a little: its first seconds ran at about 7-13% more server CPU per request (young
 * generation regrowing, old generation limits set from the small live size), which is why
 * PLINTH_IDLE_COLLECTION_MS is off unless set.
 */
/** The event loop's busy and idle time so far (ms), as performance.eventLoopUtilization() gives it, the time in progress included. */
export interface LoopTimes {
  active: number;
  idle: number;
}

export class IdleCollector {
  private timer?: NodeJS.Timeout;
  private last: LoopTimes;
  /**
   * Collections per quiet spell: the first frees the old generation's garbage; the one that comes
   * YOUNG_GENERATION_QUIET_MS later gives back the young generation.
   */
  private readonly collectionsPerQuietSpell: number;
  /** The start-up counts as activity: its garbage and grown young generation go at the first quiet checks. */
  private pending: number;
  /** Time spent in the last check's collection, left out of the next check's utilization. */
  private collectingMs = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly collect: () => void = collectGarbage,
    youngGenerationQuietMs = YOUNG_GENERATION_QUIET_MS,
    private readonly loopTimes: () => LoopTimes = () => performance.eventLoopUtilization(),
  ) {
    this.collectionsPerQuietSpell = 1 + Math.ceil(youngGenerationQuietMs / intervalMs);
    this.pending = this.collectionsPerQuietSpell;
    this.last = loopTimes();
  }

  /** Runs check() every intervalMs. */
  start(): void {
    this.last = this.loopTimes();
    this.timer = setInterval(() => this.check(), this.intervalMs).unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Collects when the loop was quiet since the last check and a quiet spell's collections are not all done. */
  check(): void {
    const now = this.loopTimes();
    const active = now.active - this.last.active;
    const idle = now.idle - this.last.idle;
    this.last = now;
    const utilization = active + idle > 0 ? Math.max(0, active - this.collectingMs) / (active + idle) : 0;
    this.collectingMs = 0;
    if (utilization >= QUIET_UTILIZATION) {
      this.pending = this.collectionsPerQuietSpell;
      return;
    }
    if (this.pending === 0) return;
    this.pending--;
    const before = this.loopTimes().active;
    this.collect();
    this.collectingMs = this.loopTimes().active - before;
  }
}
