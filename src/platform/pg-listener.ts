import pg from 'pg';
import type { Logger } from 'pino';

export interface ListenerOptions {
  /** Connection string for the dedicated connection (LISTEN holds a connection of its own). */
  url: string;
  channel: string;
  /** Names the connection in pg_stat_activity. */
  applicationName: string;
  logger: Logger;
  /** Aborted when the process starts shutting down: a lost connection is then expected. */
  shutdown: AbortSignal;
  onNotification(payload: string): void;
  /** Called each time the listener is (again) listening: notifications sent meanwhile were missed. */
  onListening?(): void;
}

/** SQLSTATE of "terminating connection due to administrator command": the server is stopping. */
const ADMIN_SHUTDOWN = '57P01';

/**
 * Logs a database failure of a background connection. Ctrl-C reaches the embedded PostgreSQL
 * too, which may close our connections before our own shutdown starts: an orderly stop of the
 * database is news (info, no stack), not a fault.
 */
export function reportDatabaseTrouble(logger: Logger, shutdown: AbortSignal, error: unknown, level: 'warn' | 'error', message: string): void {
  if (shutdown.aborted || (error as { code?: string } | null)?.code === ADMIN_SHUTDOWN) logger.info(`${message}: the database is shutting down`);
  else logger[level]({ err: error }, message);
}

const FIRST_RECONNECT_DELAY_MS = 250;
const LAST_RECONNECT_DELAY_MS = 10_000;

/**
 * LISTENs on one channel over a connection of its own, and reconnects with a doubling delay
 * (250 ms to 10 s) when the connection is lost.
 */
export class PostgresListener {
  private client: pg.Client | undefined;
  private closed = false;
  private reconnectDelay = FIRST_RECONNECT_DELAY_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ListenerOptions) {}

  /** Resolves once listening; rejects when the first connection fails. */
  async start(): Promise<void> {
    await this.listen();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    const { url, channel, applicationName, logger } = this.options;
    const client = new pg.Client({ connectionString: url, application_name: applicationName });
    client.on('notification', (message) => {
      if (message.channel === channel) this.options.onNotification(message.payload ?? '');
    });
    client.on('error', (error) => {
      reportDatabaseTrouble(logger, this.options.shutdown, error, 'warn', `the LISTEN connection of ${channel} was lost`);
      this.connectionLost(client);
    });
    client.on('end', () => this.connectionLost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${channel}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.reconnectDelay = FIRST_RECONNECT_DELAY_MS;
    this.options.onListening?.();
  }

  private connectionLost(client: pg.Client): void {
    if (this.closed || this.options.shutdown.aborted || this.client !== client) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    this.listenAgainLater();
  }

  private listenAgainLater(): void {
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(delay * 2, LAST_RECONNECT_DELAY_MS);
    this.reconnectTimer = setTimeout(() => {
      if (this.closed || this.options.shutdown.aborted) return;
      this.listen().catch((error: unknown) => {
        reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'warn', `LISTEN on ${this.options.channel} could not reconnect`);
        this.listenAgainLater();
      });
    }, delay);
  }
}
