/** A custom service run as a child of this process, as its supervisor sees it. */
export interface ChildServiceStatus {
  name: string;
  /** not-scaffolded, not-runnable, starting, running, restarting, stopped or failed. */
  state: string;
  pid?: number;
  /** Restarts after crashes in a row. */
  restarts: number;
}

/** What runs custom services as children (`plinth start`'s supervisor): their states, and stopping and starting one. */
export interface ChildServiceControl {
  states(): ChildServiceStatus[];
  /** Stops the service (SIGTERM, then SIGKILL after a grace period) and keeps it stopped. */
  stopService(name: string): Promise<void>;
  /** Starts the service again (at once) when it is not running. */
  startService(name: string): void;
}

/**
 * Where `plinth start` hands the supervisor of the custom services it runs beside the server, in
 * the same process, so that the admin API can stop and start them. A server started otherwise
 * (tests, another supervisor) has none attached: its custom services are only health-checked.
 */
export class ChildServices {
  private control: ChildServiceControl | undefined;
  private readonly attached = new Set<() => Promise<void>>();

  /** Hands over the supervisor, before it starts the services; resolves once every `onAttach` listener has run. */
  async attach(control: ChildServiceControl): Promise<void> {
    this.control = control;
    for (const listener of this.attached) await listener();
  }

  /** Runs `listener` when a supervisor is handed over (before it starts the services). */
  onAttach(listener: () => Promise<void>): void {
    this.attached.add(listener);
  }

  /** The service of that name when this process runs it; undefined otherwise. */
  status(name: string): ChildServiceStatus | undefined {
    return this.control?.states().find((service) => service.name === name);
  }

  async stop(name: string): Promise<void> {
    await this.control?.stopService(name);
  }

  start(name: string): void {
    this.control?.startService(name);
  }
}
