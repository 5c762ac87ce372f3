import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, Logger } from 'pino';

type LogArguments = [unknown, ...unknown[]];

/**
 * A request's logger: pino's child with the request's id, made when the request first writes a
 * line at an enabled level or asks for more than writing. Most requests write none (at `warn`,
 * Fastify's request lines are off), and making the child would cost every request the
 * serialisation of its bindings. It logs exactly as the child would.
 */
class RequestLogger {
  private made: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly childBindings: Bindings,
  ) {}

  private get logger(): Logger {
    return (this.made ??= this.parent.child(this.childBindings));
  }

  private write(level: Level, args: LogArguments): void {
    if (!(this.made ?? this.parent).isLevelEnabled(level)) return;
    (this.logger[level] as (...args: LogArguments) => void)(...args);
  }

  trace(...args: LogArguments): void {
    this.write('trace', args);
  }

  debug(...args: LogArguments): void {
    this.write('debug', args);
  }

  info(...args: LogArguments): void {
    this.write('info', args);
  }

  warn(...args: LogArguments): void {
    this.write('warn', args);
  }

  error(...args: LogArguments): void {
    this.write('error', args);
  }

  fatal(...args: LogArguments): void {
    this.write('fatal', args);
  }

  silent(): void {}

  get level(): string {
    return (this.made ?? this.parent).level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.made ?? this.parent).isLevelEnabled(level);
  }

  bindings(): Bindings {
    return this.logger.bindings();
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.logger.child(bindings, options);
  }
}

/**
 * Fastify's childLoggerFactory: a lazily made child, or pino's own when the route sets its own
 * level or serializers (the child must apply them from the start).
 */
export function requestLogger(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  if (options.level !== undefined || options.serializers !== undefined) return parent.child(bindings, options);
  return new RequestLogger(parent as Logger, bindings) as unknown as FastifyBaseLogger;
}
