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
   * With grownBy: a busy process past this multiple of its idle size collects anyway, at most once
   * every PRESSURE_COLLECTION_MS, when its caches keyed by the client's text have taken in
   * `pressureChurn` new entries since its last busy collection (or since its idle size was taken).
   * Under input that is new at every request (hostile, or texts that inline their values), V8
   * lets its heap grow to several times the live data, the evicted entries among it, before it
   * collects. Ordinary load repeats its texts: it grows the heap too, but V8's own collections
   * bound it, and a busy collection costs the requests that follow (see laterSpellQuietMs).
   */
  pressureBy?: number;
  pressureChurn?: number;
  /** A count that grows by one with each entry the caches keyed by the client's text take in. */
  churn?: () => number;
  /**
   * With grownBy: how long a later quiet spell must last before its collections. A full
   * collection costs the next requests far more than its own pause (V8 drops the optimised code
   * that held objects it freed, and compiles it again), so the short gaps of steady or bursty
   * traffic must not count as quiet; the start-up's spell collects at its first quiet check.
   */
  laterSpellQuietMs?: number;
  residentBytes?: () => number;
  collect?: () => void;
  youngGenerationQuietMs?: number;
  loopTimes?: () => LoopTimes;
}

/**
 * Where the current quiet spell is: no collection yet (quiet since this loop time, ms), the first
 * done (at this loop time), or both done.
 */
type Spell = { collected: 'none'; since: number } | { collected: 'first'; at: number } | { collected: 'both' };

/**
 * Gives memory back once the process goes quiet: V8 collects only when allocation fills its
 * spaces, so a burst's garbage and grown young generation would stay until the next burst. After
 * activity, a quiet spell gets two full collections: at its first quiet check (the old generation's
 * garbage) and at the first one YOUNG_GENERATION_QUIET_MS after it (the young generation). The next
 * burst's first seconds then cost more CPU, hence the options: only the start-up's spell
 * (`startUpOnly`), then only long quiet spells after a burst that left the process larger
 * (`grownBy`, `laterSpellQuietMs`), and under load only while input new at every request fills the
 * caches keyed by the client's text (`pressureBy`, `pressureChurn`).
 */
export class IdleCollector {
  private timer?: NodeJS.Timeout;
  private readonly startUpOnly: boolean;
  private readonly collect: () => void;
  private readonly youngGenerationQuietMs: number;
  private readonly loopTimes: () => LoopTimes;
  private readonly grownBy: number | undefined;
  private readonly pressureBy: number | undefined;
  private readonly laterSpellQuietMs: number;
  /** Loop time (ms) of the last collection under pressure. */
  private pressureCollectedAt = -Infinity;
  private readonly residentBytes: () => number;
  private readonly churn: () => number;
  private readonly pressureChurn: number;
  /** Resident bytes once the start-up's collections were done (grownBy only). */
  private idleBytes: number | undefined;
  /** The churn count at the last busy collection, or when the idle size was taken. */
  private churnCounted = 0;
  private last: LoopTimes;
  /** The start-up counts as activity: its garbage and grown young generation go in the first quiet spell. */
  private spell: Spell = { collected: 'none', since: 0 };
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
      laterSpellQuietMs = 0,
      pressureChurn = 0,
      churn = () => 0,
      residentBytes = () => process.memoryUsage.rss(),
    }: IdleCollectorOptions = {},
  ) {
    this.startUpOnly = startUpOnly;
    this.grownBy = grownBy;
    this.pressureBy = pressureBy;
    this.laterSpellQuietMs = laterSpellQuietMs;
    this.residentBytes = residentBytes;
    this.churn = churn;
    this.pressureChurn = pressureChurn;
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
    return this.churn() - this.churnCounted >= this.pressureChurn && this.residentBytes() > this.pressureBy * this.idleBytes;
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
      if (this.grownBy !== undefined && this.idleBytes === undefined && this.spell.collected === 'both') {
        this.idleBytes = this.residentBytes();
        this.churnCounted = this.churn();
      }
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
      if (!(inStartUp && this.spell.collected === 'first')) this.spell = { collected: 'none', since: elapsed };
      if (this.underPressure(elapsed)) {
        this.pressureCollectedAt = elapsed;
        this.churnCounted = this.churn();
        this.collect();
        this.collectedLastCheck = true;
      }
      return;
    }
    if (this.spell.collected === 'both') return;
    if (this.spell.collected === 'first' && elapsed - this.spell.at < this.youngGenerationQuietMs) return;
    if (this.spell.collected === 'none' && this.idleBytes !== undefined) {
      if (elapsed - this.spell.since < this.laterSpellQuietMs) return;
      if (this.residentBytes() <= this.grownBy! * this.idleBytes) {
        this.spell = { collected: 'both' };
        return;
      }
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
