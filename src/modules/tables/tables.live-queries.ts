import { createHash } from 'node:crypto';
import { GraphQLError } from 'graphql';
import type pg from 'pg';
import type { Logger } from 'pino';
import { Counter, Histogram } from 'prom-client';
import { LOCK_KEYS } from '../../db/lock-keys';
import type { Metrics } from '../../platform/metrics';
import { PostgresListener, reportDatabaseTrouble } from '../../platform/pg-listener';
import { tableKey } from '../../platform/sql-renames';
import type { QualifiedTable } from './tables.metadata';
import { quote, type CompiledStatement } from './tables.sql';

// node-pg's own conversion of a bound value to the text it sends (arrays as array literals, dates as ISO text).
const { prepareValue } = require('pg/lib/utils') as { prepareValue(value: unknown): string | Buffer | null };

/** The channel the trigger function (migration LiveQueryNotify) announces changes on. */
const CHANNEL = 'plinth_live';
/** The statement-level trigger on each tracked table with live subscribers. */
const TRIGGER = 'plinth_live_changed';
/**
 * After a refetch, changes announced within this long join the next one: the first change of a
 * quiet table is refetched at once, a burst at most once per refetch and this gap.
 */
const COALESCE_MS = 10;
/** PostgreSQL's JSON of a row of the statement: kept as text (its hash tells a change). */
const JSON_AS_TEXT = { getTypeParser: () => (text: string) => text } as unknown as pg.CustomTypesConfig;

export interface LiveQuerySettings {
  /** Every live query is also refetched this often, for changes made outside the triggers (0: never). */
  fallbackIntervalMs: number;
  /** Most cohorts one refetch statement serves. */
  batchSize: number;
}

export interface LiveQueryDependencies {
  pool: pg.Pool;
  /** Connection string for the LISTEN connection. */
  url: string;
  logger: Logger;
  shutdown: AbortSignal;
  metrics?: Metrics;
  settings: LiveQuerySettings;
  /** What a subscriber is told of a statement's failure (logged when unexpected). */
  failure(error: unknown): GraphQLError;
}

/** What a live query's subscriber receives: the field's value (parsed once per cohort), or the error that ends it. */
export type LiveEvent = { value: unknown } | { error: GraphQLError };

/** The field's value of an event, or its error (the field's resolver). */
export function liveEventValue(event: LiveEvent): unknown {
  if ('error' in event) throw event.error;
  return event.value;
}

/** A subscription's request: the statement (with the role's permission in it), the values it binds, and the tables it reads. */
export interface LiveRequest {
  statement: CompiledStatement;
  values: unknown[];
  /** The tracked tables the statement reads. */
  tables: readonly QualifiedTable[];
  /**
   * The request planned again under the metadata now served (thrown: the document no longer fits
   * the role's schema); without it, a metadata change ends the subscription.
   */
  replan?: () => LiveRequest;
}

/** The answer of a statement that returns no row (a `_by_pk` of a missing key). */
const NO_ROW = 'null';

/**
 * Live queries of the generated API (as Hasura's multiplexed live queries): subscribers with the
 * same statement and bound values (variables and the session values it reads) form a cohort that
 * runs once; the cohorts of one statement (a poller) are refetched together, up to the batch size
 * in one statement that joins their values, each as a row of a JSON array, to the statement
 * LATERAL. A cohort's subscribers get a result only when its text changed. A refetch follows a
 * committed change to a table the statement reads (a statement-level trigger NOTIFYs every
 * instance), bursts coalesced into one more refetch, and a fallback interval.
 */
export class LiveQueries {
  private readonly pollers = new Map<string, Poller>();
  /** Tables whose trigger this instance has seen in place. */
  private readonly armed = new Set<string>();
  /** Other readers of the tables' changes (streaming subscriptions' early wake-up), by tableKey. */
  private readonly watchers = new Map<string, Set<() => void>>();
  private readonly listener: PostgresListener;
  private readonly refetchSeconds?: Histogram;
  private readonly statements?: Counter;

  constructor(private readonly deps: LiveQueryDependencies) {
    this.listener = new PostgresListener({
      url: deps.url,
      channel: CHANNEL,
      applicationName: 'plinth-live-queries',
      logger: deps.logger,
      shutdown: deps.shutdown,
      onNotification: (payload) => this.changed(payload),
      // Changes committed while the connection was down were not announced.
      onListening: () => {
        for (const poller of this.pollers.values()) poller.schedule();
        for (const watchers of this.watchers.values()) for (const changed of watchers) changed();
      },
    });
    const registry = deps.metrics?.registry;
    if (registry) {
      this.refetchSeconds = new Histogram({
        name: 'plinth_live_query_refetch_duration_seconds',
        help: 'Refetches of a live query (all its cohorts, in batches), from the first statement to the last result sent',
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
        registers: [registry],
      });
      this.statements = new Counter({
        name: 'plinth_live_query_statements_total',
        help: 'Statements run for live queries: refetches (one per batch of cohorts) and first fetches of new cohorts',
        registers: [registry],
      });
      deps.metrics!.addGauge('plinth_live_queries', 'Live queries of the generated API: subscribers, cohorts and pollers', ['kind'], async () => {
        const { subscribers, cohorts } = this.stats;
        return [
          { labels: { kind: 'subscribers' }, value: subscribers },
          { labels: { kind: 'cohorts' }, value: cohorts },
          { labels: { kind: 'pollers' }, value: this.pollers.size },
        ];
      });
    }
  }

  async start(): Promise<void> {
    await this.listener.start();
  }

  async close(): Promise<void> {
    await this.listener.close();
    for (const poller of this.pollers.values()) poller.end();
  }

  get stats(): { subscribers: number; cohorts: number } {
    let subscribers = 0;
    let cohorts = 0;
    for (const poller of this.pollers.values()) {
      for (const cohort of poller.cohorts.values()) {
        cohorts++;
        subscribers += cohort.members.size;
      }
    }
    return { subscribers, cohorts };
  }

  /**
   * Plans every live query again under the metadata now served, each subscriber with its own
   * session and variables, and moves it to the cohort of its new statement: a subscriber whose
   * result is the same gets no message, one whose result changed (a narrower permission) gets the
   * new one. Those whose document no longer fits their role's schema end with `error`.
   */
  replanAll(error: GraphQLError): void {
    const pollers = [...this.pollers.values()];
    this.pollers.clear();
    for (const poller of pollers) for (const member of poller.detachAll()) void this.rejoin(member, error);
  }

  private async rejoin(member: LiveSubscription, error: GraphQLError): Promise<void> {
    let request: LiveRequest;
    try {
      if (!member.replan) throw error;
      request = member.replan();
    } catch {
      return member.push({ error });
    }
    try {
      await this.pollerOf(request).attach(member, request);
    } catch (failure) {
      member.push({ error: failure instanceof GraphQLError ? failure : this.failure(failure) });
    }
  }

  private pollerOf(request: LiveRequest): Poller {
    const { statement } = request;
    let poller = this.pollers.get(statement.text);
    if (!poller) {
      const created = new Poller(this, request, () => {
        if (this.pollers.get(statement.text) === created) this.pollers.delete(statement.text);
      });
      this.pollers.set(statement.text, (poller = created));
    }
    return poller;
  }

  /** The subscriber's events: the current result first, then each changed one. */
  async subscribe(request: LiveRequest): Promise<AsyncIterable<LiveEvent>> {
    const subscription = new LiveSubscription(request.replan);
    try {
      await this.pollerOf(request).attach(subscription, request);
    } catch (error) {
      // A metadata change ended its poller during the first fetch: planned again under the new metadata (once).
      if (!(error instanceof GraphQLError && error.extensions.code === 'LIVE_QUERY_ENDED' && request.replan)) throw error;
      const replanned = request.replan();
      await this.pollerOf(replanned).attach(subscription, replanned);
    }
    return subscription;
  }

  /**
   * Calls `changed` after each committed change to `table` (any instance's, the same
   * notification live queries follow; also once the listening connection is back, changes may
   * have gone unannounced), arming the table's trigger first, until the returned function is called.
   */
  watch(table: QualifiedTable, changed: () => void): () => void {
    const key = tableKey(table);
    let watchers = this.watchers.get(key);
    if (!watchers) this.watchers.set(key, (watchers = new Set()));
    // A function of its own per watch: the same callback watched twice is two watches.
    const watcher = () => changed();
    watchers.add(watcher);
    this.arm([table]).catch((error: unknown) => this.report(error, 'the change trigger could not be armed'));
    return () => {
      watchers.delete(watcher);
      if (watchers.size === 0 && this.watchers.get(key) === watchers) this.watchers.delete(key);
    };
  }

  /** Creates the trigger on each table that has none (once per table and instance). */
  async arm(tables: readonly QualifiedTable[]): Promise<void> {
    for (const table of tables) {
      const key = tableKey(table);
      if (this.armed.has(key)) continue;
      const client = await this.deps.pool.connect();
      try {
        await client.query('BEGIN');
        // Instances arming the same table at once: one creates it, the others find it.
        await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEYS.liveQueryTriggers]);
        const qualified = `${quote(table.schema)}.${quote(table.name)}`;
        const { rows } = await client.query('SELECT 1 FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = $2', [qualified, TRIGGER]);
        if (rows.length === 0) {
          await client.query(
            `CREATE TRIGGER ${TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${qualified} FOR EACH STATEMENT EXECUTE FUNCTION public.plinth_live_changed()`,
          );
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        // A view has no such trigger: its live queries follow the fallback interval only.
        this.deps.logger.warn({ err: error, table: key }, 'no live-query trigger on the table: its live queries are refetched on the fallback interval only');
      } finally {
        client.release();
      }
      this.armed.add(key);
    }
  }

  get settings(): LiveQuerySettings {
    return this.deps.settings;
  }

  async query(text: string, values: unknown[]): Promise<{ n: string; j: string | null }[]> {
    this.statements?.inc();
    return (await this.deps.pool.query<{ n: string; j: string | null }>({ text, values, types: JSON_AS_TEXT })).rows;
  }

  /** The types PostgreSQL gives the statement's parameters (by preparing it, once per poller). */
  async parameterTypes(text: string): Promise<string[]> {
    const client = await this.deps.pool.connect();
    try {
      await client.query(`PREPARE plinth_live_describe AS ${text}`);
      try {
        const { rows } = await client.query<{ types: string[] }>(
          "SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = 'plinth_live_describe'",
        );
        return rows[0].types;
      } finally {
        await client.query('DEALLOCATE plinth_live_describe');
      }
    } finally {
      client.release();
    }
  }

  failure(error: unknown): GraphQLError {
    return this.deps.failure(error);
  }

  observeRefetch(seconds: number): void {
    this.refetchSeconds?.observe(seconds);
  }

  report(error: unknown, message: string): void {
    reportDatabaseTrouble(this.deps.logger, this.deps.shutdown, error, 'error', message);
  }

  private changed(payload: string): void {
    let table: QualifiedTable;
    try {
      const [schema, name] = JSON.parse(payload) as [string, string];
      table = { schema, name };
    } catch {
      return;
    }
    const key = tableKey(table);
    for (const poller of this.pollers.values()) if (poller.reads.has(key)) poller.schedule();
    for (const changed of this.watchers.get(key) ?? []) changed();
  }
}

/** The subscribers with the same bound values: one result, sent when it changed. */
class Cohort {
  readonly members = new Set<LiveSubscription>();
  /**
   * The SHA-256 of the last result's text, and its value for a subscriber that joins (the same
   * objects every member's group executes on: no copy per subscriber).
   */
  hash?: string;
  value?: LiveEvent;

  constructor(
    readonly key: string,
    /** The bound values as the text PostgreSQL reads (null for NULL), one row of the refetch. */
    readonly texts: (string | null)[],
  ) {}

  /** Takes a fetched result; sends it to the members when it changed. */
  deliver(text: string): void {
    const hash = createHash('sha256').update(text).digest('base64');
    if (hash === this.hash) return;
    this.hash = hash;
    this.value = { value: JSON.parse(text) };
    for (const member of this.members) member.push(this.value, hash);
  }
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * One subscriber of a cohort, as the async iterator its subscription group reads: at most one
 * event waits (a newer result replaces one not yet read), an error is the last event. A class
 * with three fields: a Repeater per subscriber (its executor suspended in an async function, its
 * bound promise methods, its buffer) cost several times more, kept as long as the subscription.
 */
class LiveSubscription implements AsyncIterableIterator<LiveEvent> {
  private waiting?: (result: IteratorResult<LiveEvent>) => void;
  private pending?: LiveEvent;
  ended = false;
  /** Its place (none while it is planned again). */
  poller?: Poller;
  cohort?: Cohort;
  /** The hash of the last result given (a cohort it moves to sends nothing when its result is the same). */
  lastHash?: string;

  constructor(readonly replan: (() => LiveRequest) | undefined) {}

  push(event: LiveEvent, hash?: string): void {
    if (this.ended) return;
    this.lastHash = hash;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting({ done: false, value: event });
    } else this.pending = event;
    if ('error' in event) this.finish();
  }

  next(): Promise<IteratorResult<LiveEvent>> {
    const pending = this.pending;
    if (pending) {
      this.pending = undefined;
      return Promise.resolve({ done: false, value: pending });
    }
    if (this.ended) return Promise.resolve(DONE);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<LiveEvent>> {
    this.pending = undefined;
    this.finish();
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Leaves the cohort; a read waiting ends. */
  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.(DONE);
    const { poller, cohort } = this;
    this.poller = undefined;
    this.cohort = undefined;
    if (poller && cohort) poller.leave(cohort, this);
  }
}

/** The cohorts of one statement, refetched together. */
class Poller {
  readonly cohorts = new Map<string, Cohort>();
  /** Cohorts whose first fetch is running (joined by subscribers meanwhile). */
  private readonly pending = new Map<string, Promise<Cohort>>();
  readonly reads: ReadonlySet<string>;
  private readonly ready: Promise<string>;
  private running = false;
  private again = false;
  /** Counts the changes announced, so that a cohort whose first fetch overlapped one refetches. */
  private changes = 0;
  private ended = false;
  private readonly timer?: NodeJS.Timeout;

  constructor(
    private readonly owner: LiveQueries,
    private readonly request: LiveRequest,
    private readonly closed: () => void,
  ) {
    this.reads = new Set(request.tables.map(tableKey));
    const interval = owner.settings.fallbackIntervalMs;
    if (interval > 0) this.timer = setInterval(() => this.schedule(), interval).unref();
    // The trigger is in place before the first fetch: a change committed after it is announced.
    this.ready = owner.arm(request.tables).then(() => this.multiplexed());
    this.ready.catch(() => undefined);
  }

  /** Puts `member` in the cohort of the request's values (its first fetch if new), and gives it the cohort's result unless it has it. */
  async attach(member: LiveSubscription, request: LiveRequest): Promise<void> {
    const texts = request.values.map(asText);
    const key = JSON.stringify(texts);
    let cohort = this.cohorts.get(key);
    if (!cohort) {
      let opening = this.pending.get(key);
      if (!opening) {
        opening = this.open(key, texts);
        this.pending.set(key, opening);
        opening.then(
          () => this.pending.delete(key),
          () => this.pending.delete(key),
        );
      }
      try {
        cohort = await opening;
      } catch (error) {
        if (this.cohorts.size === 0 && this.pending.size === 0) this.end();
        throw error;
      }
    }
    if (member.ended) return this.leave(cohort, member);
    member.poller = this;
    member.cohort = cohort;
    cohort.members.add(member);
    if (cohort.value && cohort.hash !== member.lastHash) member.push(cohort.value, cohort.hash);
  }

  /** Stops refetching and hands over every member (to be placed again). */
  detachAll(): LiveSubscription[] {
    const members = [...this.cohorts.values()].flatMap((cohort) => {
      const taken = [...cohort.members];
      cohort.members.clear();
      return taken;
    });
    for (const member of members) {
      member.poller = undefined;
      member.cohort = undefined;
    }
    this.cohorts.clear();
    this.end();
    return members;
  }

  /** A subscriber left (or ended with an error): the cohort ends with its last member, the poller with its last cohort. */
  leave(cohort: Cohort, subscription: LiveSubscription): void {
    cohort.members.delete(subscription);
    if (cohort.members.size > 0 || this.cohorts.get(cohort.key) !== cohort) return;
    this.cohorts.delete(cohort.key);
    if (this.cohorts.size === 0 && this.pending.size === 0) this.end();
  }

  /** A change to a table the statement reads (or the fallback interval): refetch, once more if one is running. */
  schedule(): void {
    this.changes++;
    if (this.ended) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.refetchUntilQuiet();
  }

  /** Stops refetching; with `error`, every subscriber gets it and ends. */
  end(error?: GraphQLError): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.timer);
    this.closed();
    if (!error) return;
    for (const cohort of this.cohorts.values()) for (const member of [...cohort.members]) member.push({ error });
    this.cohorts.clear();
  }

  /** The first fetch of a new cohort (alone): a value PostgreSQL refuses is this subscriber's error, nobody else's. */
  private async open(key: string, texts: (string | null)[]): Promise<Cohort> {
    const cohort = new Cohort(key, texts);
    const changesBefore = this.changes;
    const [row] = await this.fetch([cohort]);
    cohort.deliver(row?.j ?? NO_ROW);
    if (this.ended) throw new GraphQLError('the live query ended while it started: subscribe again', { extensions: { code: 'LIVE_QUERY_ENDED' } });
    this.cohorts.set(key, cohort);
    if (this.changes !== changesBefore) this.schedule();
    return cohort;
  }

  private async refetchUntilQuiet(): Promise<void> {
    do {
      this.again = false;
      const started = process.hrtime.bigint();
      await this.refetch().catch((error: unknown) => this.owner.report(error, 'a live query could not be refetched'));
      this.owner.observeRefetch(Number(process.hrtime.bigint() - started) / 1e9);
      await new Promise((resolve) => setTimeout(resolve, COALESCE_MS));
    } while (this.again && !this.ended);
    this.running = false;
  }

  private async refetch(): Promise<void> {
    const cohorts = [...this.cohorts.values()];
    const size = this.owner.settings.batchSize;
    for (let start = 0; start < cohorts.length && !this.ended; start += size) {
      const batch = cohorts.slice(start, start + size);
      let rows: { n: string; j: string | null }[];
      try {
        rows = await this.fetch(batch);
      } catch (error) {
        // One cohort's values may fail the statement (a pattern PostgreSQL refuses, met once a row
        // comes): each runs alone, and those that fail end with their error.
        if (batch.length === 1) this.fail(batch[0], error);
        else
          for (const cohort of batch)
            await this.fetch([cohort]).then(
              ([row]) => cohort.deliver(row?.j ?? NO_ROW),
              (failure: unknown) => this.fail(cohort, failure),
            );
        continue;
      }
      const results = new Array<string | null>(batch.length).fill(null);
      for (const row of rows) results[Number(row.n) - 1] = row.j;
      for (const [index, cohort] of batch.entries()) if (this.cohorts.get(cohort.key) === cohort) cohort.deliver(results[index] ?? NO_ROW);
    }
  }

  private fail(cohort: Cohort, error: unknown): void {
    const failure = this.owner.failure(error);
    this.cohorts.delete(cohort.key);
    for (const member of [...cohort.members]) member.push({ error: failure });
    if (this.cohorts.size === 0 && this.pending.size === 0) this.end();
  }

  private async fetch(cohorts: Cohort[]): Promise<{ n: string; j: string | null }[]> {
    const text = await this.ready;
    return this.owner.query(text, [JSON.stringify(cohorts.map((cohort) => cohort.texts))]);
  }

  /**
   * The statement over a set of cohorts: `$1` is a JSON array with a row of bound values (as
   * text) per cohort, each parameter `$k` of the statement read from it and cast to the type
   * PostgreSQL gave it; `n` numbers the cohorts from 1.
   */
  private async multiplexed(): Promise<string> {
    const { text } = this.request.statement;
    const types = await this.owner.parameterTypes(text);
    // Identifiers and literals are skipped: only a bare $k is a parameter.
    const inner = text.replace(/"(?:[^"]|"")*"|'(?:[^']|'')*'|\$(\d+)/g, (match, index: string | undefined) => {
      if (index === undefined) return match;
      const type = types[Number(index) - 1];
      return `("c"."v"->>${Number(index) - 1})::${type === 'unknown' ? 'text' : type}`;
    });
    return `SELECT "c"."n", "q"."j" FROM json_array_elements($1::json) WITH ORDINALITY AS "c"("v", "n") CROSS JOIN LATERAL (${inner}) AS "q"`;
  }
}

/** A bound value as the text PostgreSQL reads it (the parameter's text form). */
export function asText(value: unknown): string | null {
  const prepared = prepareValue(value);
  return prepared === null ? null : Buffer.isBuffer(prepared) ? `\\x${prepared.toString('hex')}` : prepared;
}
