import type { Logger } from 'pino';
import type { PubSub } from 'type-graphql';
import { PostgresListener, reportDatabaseTrouble } from './pg-listener';
import type { RecurringTask } from './recurring';
import type * as RepeaterModule from '@repeaterjs/repeater' with { 'resolution-mode': 'import' };

// The package is typed as an ES module but ships a CommonJS build, which require() loads.
const { Repeater, SlidingBuffer } = require('@repeaterjs/repeater') as typeof RepeaterModule;

/** What services need to announce an event to subscribers. */
export interface EventPublisher {
  publish(topic: string, payload: unknown): void;
}

export interface PubSubOptions {
  /** Connection string for the dedicated LISTEN connection. */
  url: string;
  /** Runs a statement on the shared pool (publishing needs no connection of its own). */
  query: (sql: string, parameters: unknown[]) => Promise<unknown[]>;
  logger: Logger;
  /** Aborted when the process starts shutting down: a lost connection is then expected. */
  shutdown: AbortSignal;
}

const CHANNEL = 'plinth_pubsub';
/** NOTIFY payloads are limited to 8000 bytes; larger messages travel through pubsub_payloads. */
const INLINE_LIMIT = 7900;
/** Spilled payloads are kept this long, enough for every listener to fetch them. */
const SPILL_RETENTION = '5 minutes';
/** How often spilled payloads older than that are deleted. */
const SPILL_CLEANUP_EVERY_MS = 60_000;
/** Events a slow subscriber may lag behind before its oldest ones are dropped. */
const SUBSCRIBER_BUFFER = 1000;

type Envelope = { topic: string; payload: unknown } | { topic: string; ref: string };

/**
 * type-graphql's PubSub over PostgreSQL LISTEN/NOTIFY: every instance on the same database
 * LISTENs on one channel, so an event published by any instance reaches the subscribers of all
 * of them (the publisher's own included, through the same path). Delivery is at most once, as
 * for any subscription: a subscriber that is not connected when an event happens misses it.
 */
export class PostgresPubSub implements PubSub, EventPublisher {
  private readonly subscribers = new Map<string, Set<(payload: unknown) => void>>();
  private readonly listener: PostgresListener;
  private delivery: Promise<void> = Promise.resolve();
  private sending: Promise<void> = Promise.resolve();

  constructor(private readonly options: PubSubOptions) {
    // Events published while the listener reconnects are missed by this instance.
    this.listener = new PostgresListener({
      url: options.url,
      channel: CHANNEL,
      applicationName: 'plinth-pubsub',
      logger: options.logger,
      shutdown: options.shutdown,
      onNotification: (text) => {
        // One chain keeps events in publication order, spilled ones included.
        this.delivery = this.delivery.then(() => this.deliver(text).catch((error: unknown) => this.report(error, 'could not deliver a subscription event')));
      },
    });
  }

  /** Resolves once this instance is listening. */
  async start(): Promise<void> {
    await this.listener.start();
  }

  /** The deletion of old spilled payloads, run by one process for all (start-up adds it to the recurring tasks). */
  payloadCleanup(): RecurringTask {
    return {
      name: 'pubsub.payload-cleanup',
      schedule: { everyMs: SPILL_CLEANUP_EVERY_MS },
      run: () => this.options.query(`DELETE FROM pubsub_payloads WHERE created_at < now() - interval '${SPILL_RETENTION}'`, []),
    };
  }

  async close(): Promise<void> {
    await this.sending;
    await this.listener.close();
    await this.delivery;
  }

  /** type-graphql's form: publish(topic, payload) or publish(topic, topicId, payload). */
  publish(routingKey: string, ...args: unknown[]): void {
    const [topic, payload] = args.length >= 2 ? [`${routingKey}:${String(args[0])}`, args[1]] : [routingKey, args[0]];
    // One NOTIFY at a time: on separate pool connections they could commit out of order.
    this.sending = this.sending.then(() =>
      this.send(topic, payload ?? null).catch((error: unknown) => this.report(error, `could not publish a ${topic} event`)),
    );
  }

  /**
   * Publishes several payloads on one topic with one statement (as many NOTIFYs, in order), for
   * publishers that announce many changes at once; large payloads still travel one by one.
   */
  publishMany(topic: string, payloads: readonly unknown[]): void {
    if (payloads.length === 0) return;
    this.sending = this.sending.then(() =>
      this.sendMany(topic, payloads).catch((error: unknown) => this.report(error, `could not publish ${payloads.length} ${topic} events`)),
    );
  }

  subscribe(routingKey: string, topicId?: unknown): AsyncIterable<unknown> {
    const topic = topicId === undefined ? routingKey : `${routingKey}:${String(topicId)}`;
    const subscribers = this.subscribers;
    return new Repeater<unknown>(async (push, stop) => {
      const subscriber = (payload: unknown) => void push(payload);
      let set = subscribers.get(topic);
      if (!set) subscribers.set(topic, (set = new Set()));
      set.add(subscriber);
      await stop;
      set.delete(subscriber);
      if (set.size === 0) subscribers.delete(topic);
    }, new SlidingBuffer(SUBSCRIBER_BUFFER));
  }

  private report(error: unknown, message: string): void {
    reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'error', message);
  }

  private async send(topic: string, payload: unknown): Promise<void> {
    const inline = JSON.stringify({ topic, payload } satisfies Envelope);
    if (Buffer.byteLength(inline) <= INLINE_LIMIT) {
      await this.options.query('SELECT pg_notify($1, $2)', [CHANNEL, inline]);
      return;
    }
    await this.options.query(
      `WITH stored AS (INSERT INTO pubsub_payloads (payload) VALUES ($3::jsonb) RETURNING id)
       SELECT pg_notify($1, json_build_object('topic', $2::text, 'ref', id::text)::text) FROM stored`,
      [CHANNEL, topic, JSON.stringify(payload)],
    );
  }

  private async sendMany(topic: string, payloads: readonly unknown[]): Promise<void> {
    const inline: string[] = [];
    for (const payload of payloads) {
      const text = JSON.stringify({ topic, payload: payload ?? null } satisfies Envelope);
      if (Buffer.byteLength(text) <= INLINE_LIMIT) {
        inline.push(text);
        continue;
      }
      if (inline.length > 0) await this.notifyAll(inline.splice(0));
      await this.send(topic, payload ?? null);
    }
    if (inline.length > 0) await this.notifyAll(inline);
  }

  private async notifyAll(texts: string[]): Promise<void> {
    await this.options.query('SELECT pg_notify($1, text) FROM unnest($2::text[]) WITH ORDINALITY AS t (text, n) ORDER BY n', [CHANNEL, texts]);
  }

  private async deliver(text: string): Promise<void> {
    const envelope = JSON.parse(text) as Envelope;
    const subscribers = this.subscribers.get(envelope.topic);
    if (!subscribers) return;
    let payload: unknown;
    if ('ref' in envelope) {
      const rows = (await this.options.query('SELECT payload FROM pubsub_payloads WHERE id = $1', [envelope.ref])) as {
        payload: unknown;
      }[];
      if (rows.length === 0) return;
      payload = rows[0].payload;
    } else {
      payload = envelope.payload;
    }
    for (const subscriber of subscribers) subscriber(payload);
  }
}
