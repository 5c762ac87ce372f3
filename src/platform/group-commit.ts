import { outsideRequests } from '../db/session-variables';

/** PostgreSQL's deadlock and serialization failures: a batch that met one is written again. */
const RETRYABLE = new Set(['40P01', '40001']);
const MAX_ATTEMPTS = 3;

interface Waiting<Item, Outcome> {
  item: Item;
  resolve(outcome: Outcome): void;
  reject(error: unknown): void;
}

export interface GroupCommitOptions<Item, Outcome> {
  /**
   * Writes a batch in one statement (one commit) and answers each item's outcome, in the items'
   * order. A retryable failure writes the batch again, so the statement must be atomic.
   */
  write(items: Item[]): Promise<Outcome[]>;
  /** The most items one statement takes. */
  maxBatch: number;
  /** Called once when a batch fails for good (each submitter's promise rejects too). */
  onFailure?(error: unknown, items: number): void;
}

/**
 * Group commit: an item submitted while batches are being written waits for the next batch, and
 * its promise settles once that batch is committed, so what a caller acknowledges is never lost.
 * At low load a batch is one item, written in the turn of the event loop after it came; under
 * load, whatever arrived while the batches in flight were written, up to `maxBatch`. Two batches
 * may be in flight: one is executed by PostgreSQL while the next is prepared and sent.
 *
 * A batch mixes the work of several requests, so it is written outside any request's session
 * variables (event triggers record it as a change made by Plinth, not by one of the callers).
 */
export class GroupCommit<Item, Outcome> {
  private static readonly IN_FLIGHT = 2;
  private queue: Waiting<Item, Outcome>[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(private readonly options: GroupCommitOptions<Item, Outcome>) {}

  /** Resolves with the item's outcome once its batch is committed. */
  submit(item: Item): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.scheduled || this.inFlight >= GroupCommit.IN_FLIGHT || this.queue.length === 0) return;
    this.scheduled = true;
    this.inFlight++;
    // The items submitted in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false;
      void outsideRequests(() => this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue.splice(0, this.options.maxBatch);
    try {
      const outcomes = await this.writeWithRetry(batch.map((waiting) => waiting.item));
      batch.forEach((waiting, index) => waiting.resolve(outcomes[index]));
    } catch (error) {
      this.options.onFailure?.(error, batch.length);
      for (const waiting of batch) waiting.reject(error);
    } finally {
      this.inFlight--;
      this.kick();
    }
  }

  private async writeWithRetry(items: Item[]): Promise<Outcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.options.write(items);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt >= MAX_ATTEMPTS || !code || !RETRYABLE.has(code)) throw error;
      }
    }
  }
}
