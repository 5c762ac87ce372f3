import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { ResponseObserver } from './fastify/response-observers';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The service a route's requests count for (SLOs); its first tag otherwise. */
    service?: string;
  }
  interface FastifyRequest {
    /** Set by a handler whose answer hides an unexpected failure (a GraphQL INTERNAL_SERVER_ERROR under HTTP 200). */
    unexpectedFailure: boolean;
  }
}

type Query = (sql: string, parameters: unknown[]) => Promise<unknown>;

interface Counts {
  service: string;
  minute: Date;
  good: number;
  bad: number;
}

const MINUTE_MS = 60_000;

/** The pending map's key of a service's counts for the minute starting at `minute` (ms). */
const countsKey = (service: string, minute: number) => `${service}\u0000${minute}`;

/**
 * Counts the requests Plinth serves per service and minute, good or bad (a 5xx or an unexpected
 * failure is bad), in memory, and adds them to `request_outcomes` every `flushMs` in one
 * statement: SLOs read their good and bad events there. Counts not yet written when a process
 * dies are lost, as a metrics scrape would lose them; nothing acknowledged depends on them.
 */
export class RequestOutcomes {
  private pending = new Map<string, Counts>();
  /** Per service, its entry of `pending` for the latest minute counted. */
  private latest = new Map<string, Counts>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly query: Query,
    private readonly flushMs: number,
    private readonly logger: Logger,
  ) {}

  record(service: string, good: boolean, at = Date.now()): void {
    const minute = at - (at % MINUTE_MS);
    // The service's counts of the latest minute, found without building the pending map's key.
    const latest = this.latest.get(service);
    let counts = latest;
    if (counts === undefined || counts.minute.getTime() !== minute) {
      const key = countsKey(service, minute);
      counts = this.pending.get(key);
      if (!counts) this.pending.set(key, (counts = { service, minute: new Date(minute), good: 0, bad: 0 }));
      // A late request of an earlier minute leaves the latest minute's counts where they are.
      if (latest === undefined || minute > latest.minute.getTime()) this.latest.set(service, counts);
    }
    if (good) counts.good++;
    else counts.bad++;
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.flushMs).unref();
  }

  /** Writes what was counted; resolves when it is written (or the failure logged and the counts kept). */
  flush(): Promise<void> {
    return this.enqueueWrite(false);
  }

  /**
   * Stops the timer and writes once more, before the database pool closes (and the embedded
   * PostgreSQL stops, after everything else). An external database may be going too (a process
   * manager stopping both): counts that cannot be written then are lost, as a metrics scrape's
   * would be, which is neither a warning nor a stack trace.
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.enqueueWrite(true);
  }

  private enqueueWrite(final: boolean): Promise<void> {
    this.writing = this.writing.then(() => this.write(final));
    return this.writing;
  }

  private async write(final: boolean): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    this.latest = new Map();
    try {
      await this.query(
        `INSERT INTO request_outcomes (service, minute, good, bad)
         SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[])
         ON CONFLICT (service, minute) DO UPDATE SET good = request_outcomes.good + EXCLUDED.good, bad = request_outcomes.bad + EXCLUDED.bad`,
        [batch.map((c) => c.service), batch.map((c) => c.minute), batch.map((c) => c.good), batch.map((c) => c.bad)],
      );
    } catch (error) {
      if (final) {
        this.logger.info({ counts: batch.length, reason: (error as Error).message }, 'request outcomes not written at shutdown');
        return;
      }
      // Kept for the next attempt rather than lost.
      for (const counts of batch) {
        const key = countsKey(counts.service, counts.minute.getTime());
        const newer = this.pending.get(key);
        if (newer) {
          newer.good += counts.good;
          newer.bad += counts.bad;
        } else {
          this.pending.set(key, counts);
        }
      }
      this.logger.warn({ err: error }, 'could not write request outcomes; kept for the next attempt');
    }
  }
}

/**
 * Counts every routed response for its route's service (`config.service`, else its first tag):
 * a 5xx or a failure the handler flagged is bad. Requests no route matched count for nothing.
 */
export function requestOutcomesObserver(app: FastifyInstance, outcomes: RequestOutcomes): ResponseObserver {
  app.decorateRequest('unexpectedFailure', false);
  return (request, reply, route) => {
    if (route.url === undefined) return;
    const service = route.config?.service ?? (route.schema?.tags as string[] | undefined)?.[0];
    if (service) outcomes.record(service, reply.statusCode < 500 && !request.unexpectedFailure);
  };
}
