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

/**
 * A check whose event loop was busier than this counts as activity; one below it as quiet: above
 * what an idle server's own timers (job polling, metrics) take.
 */
const QUIET_UTILIZATION = 0.05;
/**
 * V8 shrinks its young generation (grown to two 16 MB semi-spaces by any burst of allocation) only
 * in a full collection that follows 5 s of little allocation (its throughput window): a second
 * more, so that the window is surely past.
 */
const YOUNG_GENERATION_QUIET_MS = 6000;
/** The least time between two collections under pressure (pressureBy). */
const PRESSURE_COLLECTION_MS = 10_000;

/** The event loop's busy and idle time so far (ms), as performance.eventLoopUtilization() gives it, the time in progress included. */
export interface LoopTimes {
  active: number;
  idle: number;
}

export interface IdleCollectorOptions {
  /** Only the start-up's quiet spell: the checks stop once its collections are done (unless grownBy is set). */
  startUpOnly?: boolean;
  /**
   * With startUpOnly: after the start-up's spell, a later quiet spell gets its collections too,
   * but only when the process's resident memory is more than this multiple of what it was once
   * the start-up's were done: a burst that left it that much larger (hostile input, a load test)
   * is given back; ordinary traffic's quiet spells pay nothing.
   */
  grownBy?: number;
  /**
   * With grownBy: a process past this multiple of its idle size collects even while busy, at most
   * once every PRESSURE_COLLECTION_MS. Under sustained load V8 lets its heap grow to several times
   * the live data before it collects; a full collection now and then caps that, for a pause of tens
   * of milliseconds.
   */
  pressureBy?: number;
  residentBytes?: () => number;
  collect?: () => void;
  youngGenerationQuietMs?: number;
  loopTimes?: () => LoopTimes;
}

/** Where the current quiet spell is: no collection yet, the first done (at this loop time, ms), or both done. */
type Spell = { collected: 'none' } | { collected: 'first'; at: number } | { collected: 'both' };

/**
 * Gives memory back once the process goes quiet: V8 collects only when allocation fills its
 * spaces, so a burst's garbage and grown young generation would stay until the next burst. After
 * activity, a quiet spell gets two full collections: at its first quiet check (the old generation's
 * garbage) and at the first one YOUNG_GENERATION_QUIET_MS after it (the young generation). The next
 * burst's first seconds then cost more CPU, hence the options: only the start-up's spell
 * (`startUpOnly`), then only spells after a burst that left the process larger (`grownBy`).
 */
export class IdleCollector {
  private timer?: NodeJS.Timeout;
  private readonly startUpOnly: boolean;
  private readonly collect: () => void;
  private readonly youngGenerationQuietMs: number;
  private readonly loopTimes: () => LoopTimes;
  private readonly grownBy: number | undefined;
  private readonly pressureBy: number | undefined;
  /** Loop time (ms) of the last collection under pressure. */
  private pressureCollectedAt = -Infinity;
  private readonly residentBytes: () => number;
  /** Resident bytes once the start-up's collections were done (grownBy only). */
  private idleBytes: number | undefined;
  private last: LoopTimes;
  /** The start-up counts as activity: its garbage and grown young generation go in the first quiet spell. */
  private spell: Spell = { collected: 'none' };
  /** A start-up-only collector whose collections are done. */
  private finished = false;
  /** Whether the last check collected: the next check's window holds its aftermath (weak callbacks, finalisers), not activity. */
  private collectedLastCheck = false;

  constructor(
    private readonly intervalMs: number,
    {
      startUpOnly = false,
      collect = collectGarbage,
      youngGenerationQuietMs = YOUNG_GENERATION_QUIET_MS,
      loopTimes = () => performance.eventLoopUtilization(),
      grownBy,
      pressureBy,
      residentBytes = () => process.memoryUsage.rss(),
    }: IdleCollectorOptions = {},
  ) {
    this.startUpOnly = startUpOnly;
    this.grownBy = grownBy;
    this.pressureBy = pressureBy;
    this.residentBytes = residentBytes;
    this.collect = collect;
    this.youngGenerationQuietMs = youngGenerationQuietMs;
    this.loopTimes = loopTimes;
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

  private underPressure(elapsed: number): boolean {
    if (this.pressureBy === undefined || this.idleBytes === undefined || elapsed - this.pressureCollectedAt < PRESSURE_COLLECTION_MS) return false;
    return this.residentBytes() > this.pressureBy * this.idleBytes;
  }

  /**
   * Collects when the loop was quiet since the last check and the quiet spell asks for a
   * collection; the check after a collection only notes the time. A start-up-only collector stops
   * after its second collection.
   */
  check(): void {
    if (this.finished) return;
    const now = this.loopTimes();
    if (this.collectedLastCheck) {
      // The collection's own time and what it set off: a window that would count as activity and
      // start the spell over, one collection after another.
      this.collectedLastCheck = false;
      this.last = now;
      // The start-up's spell is over: what the process holds now is its idle size.
      if (this.grownBy !== undefined && this.idleBytes === undefined && this.spell.collected === 'both') this.idleBytes = this.residentBytes();
      return;
    }
    const active = now.active - this.last.active;
    const idle = now.idle - this.last.idle;
    this.last = now;
    const utilization = active + idle > 0 ? active / (active + idle) : 0;
    // A busy check starts the spell over, except the start-up's second collection, which waits only
    // for its time: the start-up collector collects twice in all.
    const inStartUp = this.startUpOnly && this.idleBytes === undefined;
    const elapsed = now.active + now.idle;
    if (utilization >= QUIET_UTILIZATION) {
      if (!(inStartUp && this.spell.collected === 'first')) this.spell = { collected: 'none' };
      if (this.underPressure(elapsed)) {
        this.pressureCollectedAt = elapsed;
        this.collect();
        this.collectedLastCheck = true;
      }
      return;
    }
    if (this.spell.collected === 'both') return;
    if (this.spell.collected === 'first' && elapsed - this.spell.at < this.youngGenerationQuietMs) return;
    if (this.spell.collected === 'none' && this.idleBytes !== undefined && this.residentBytes() <= this.grownBy! * this.idleBytes) {
      this.spell = { collected: 'both' };
      return;
    }
    this.collect();
    this.collectedLastCheck = true;
    if (this.spell.collected === 'none') {
      this.spell = { collected: 'first', at: elapsed };
      return;
    }
    this.spell = { collected: 'both' };
    if (this.startUpOnly && this.grownBy === undefined) {
      this.finished = true;
      this.stop();
    }
  }
}
