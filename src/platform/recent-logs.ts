import type { Logger } from 'pino';

/** A log line as the process wrote it (pino's JSON), numbered in order. */
export interface RecentLogLine {
  seq: number;
  text: string;
}

type Listener = (line: RecentLogLine) => void;

/**
 * The last lines the process logged, in memory (a ring of PLATFORM_ADMIN_LOG_LINES), and whoever
 * follows them: the admin API streams them. Lines are kept as written and parsed only by a reader,
 * so logging costs one array store.
 */
export class RecentLogs {
  private readonly lines: (RecentLogLine | undefined)[];
  private next = 0;
  private readonly listeners = new Set<Listener>();

  constructor(readonly capacity: number) {
    this.lines = new Array<RecentLogLine | undefined>(capacity);
  }

  add(text: string): void {
    const line = { seq: this.next, text };
    this.lines[this.next % this.capacity] = line;
    this.next += 1;
    for (const listener of this.listeners) listener(line);
  }

  /** The lines kept, oldest first. */
  recent(): RecentLogLine[] {
    const first = Math.max(0, this.next - this.capacity);
    const kept: RecentLogLine[] = [];
    for (let seq = first; seq < this.next; seq += 1) kept.push(this.lines[seq % this.capacity]!);
    return kept;
  }

  /** Calls `listener` with every line written from now on; the returned function stops it. */
  follow(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}

const byLogger = new WeakMap<Logger, RecentLogs>();

/** Keeps `logs` as the recent lines of `logger` (createLogger does, when the admin dashboard is on). */
export function keepRecentLogs(logger: Logger, logs: RecentLogs): void {
  byLogger.set(logger, logs);
}

/** The recent lines of a logger made by createLogger with the admin dashboard on; undefined otherwise. */
export function recentLogsOf(logger: Logger): RecentLogs | undefined {
  return byLogger.get(logger);
}
