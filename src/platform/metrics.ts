import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';
import type { MetricsAccess } from '../config';

/** Who may read /metrics: defined with PLINTH_METRICS in config. */
export type { MetricsAccess };

/**
 * Operation names kept as label values: at most 500, of at most 128 characters each, so their
 * series take a bounded number of bytes (names are the client's text, up to a document long);
 * any other name counts as "(other)".
 */
const OPERATION_NAME_LIMIT = 500;
const OPERATION_NAME_MAX_LENGTH = 128;

/** One sample of a gauge whose value is read when /metrics is scraped. */
export interface GaugeSample<Label extends string> {
  labels: Record<Label, string>;
  value: number;
}

/**
 * The process's Prometheus metrics, on a registry of its own (several servers can share a test
 * process): process metrics, HTTP requests by route and status, GraphQL operations and errors by
 * operation name, and gauges other platform services add (job counts by queue and state).
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly httpDuration: RequestHistogram;
  private readonly graphqlOperations: RequestCounter;
  private readonly graphqlErrors: Counter<'operation_name' | 'code'>;
  private readonly acceptedQueries: Counter;
  private readonly operationNames = new Set<string>();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.httpDuration = new RequestHistogram(
      'plinth_http_request_duration_seconds',
      'HTTP requests by method, route pattern and status',
      ['method', 'route', 'status_code'],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    );
    this.graphqlOperations = new RequestCounter('plinth_graphql_operations_total', 'GraphQL operations answered, by operation name and type', [
      'operation_name',
      'operation_type',
    ]);
    // prom-client's registry asks a metric only for these members (name, help, type, get, reset).
    this.registry.registerMetric(this.httpDuration as unknown as Metric);
    this.registry.registerMetric(this.graphqlOperations as unknown as Metric);
    this.graphqlErrors = new Counter({
      name: 'plinth_graphql_errors_total',
      help: 'GraphQL errors answered, by operation name and error code',
      labelNames: ['operation_name', 'code'],
      registers: [this.registry],
    });
    this.acceptedQueries = new Counter({
      name: 'plinth_graphql_accepted_query_lane_total',
      help: "GraphQL queries answered without Apollo's request pipeline, as queries it had accepted before (also counted in plinth_graphql_operations_total)",
      registers: [this.registry],
    });
  }

  /** A gauge whose samples `collect` reads at each scrape (a failing read leaves it empty). */
  addGauge<Label extends string>(name: string, help: string, labelNames: readonly Label[], collect: () => Promise<GaugeSample<Label>[]>): void {
    new Gauge<Label>({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const sample of await collect().catch(() => [])) this.set(sample.labels as Partial<Record<Label, string>>, sample.value);
      },
    });
  }

  observeHttp(method: string, route: string, statusCode: number, seconds: number): void {
    this.httpDuration.observe(method, route, statusCode, seconds);
  }

  /** Counts a GraphQL operation and its errors. Names come from clients, so their number is capped. */
  observeGraphQL(operationName: string, operationType: string, errorCodes: readonly string[]): void {
    const name = this.boundedName(operationName);
    this.graphqlOperations.inc(name, operationType);
    for (const code of errorCodes) this.graphqlErrors.inc({ operation_name: name, code });
  }

  /**
   * What this process has answered since it started, read from the counters above: HTTP
   * responses, those with a 5xx status, and GraphQL errors (the admin dashboard's history
   * turns the differences between two readings into rates).
   */
  async totals(): Promise<{ requests: number; serverErrors: number; graphqlErrors: number }> {
    const { requests, serverErrors } = this.httpDuration.totals();
    const graphqlErrors = (await this.graphqlErrors.get()).values.reduce((sum, sample) => sum + sample.value, 0);
    return { requests, serverErrors, graphqlErrors };
  }

  /** Counts a query the accepted-query lane answered (src/graphql/accepted-queries.ts), besides observeGraphQL. */
  observeAcceptedQuery(): void {
    this.acceptedQueries.inc();
  }

  private boundedName(name: string): string {
    if (this.operationNames.has(name)) return name;
    if (this.operationNames.size >= OPERATION_NAME_LIMIT || name.length > OPERATION_NAME_MAX_LENGTH) return '(other)';
    this.operationNames.add(name);
    return name;
  }
}

/**
 * The series of a metric observed on every request, found through one map per label value: no
 * label object, hash string or label validation per observation, which prom-client's observe and
 * inc make on every call. Values are strings or status codes.
 */
class SeriesTable<Series> {
  private readonly root = new Map<string | number, unknown>();
  private readonly list: Series[] = [];

  constructor(
    private readonly labelNames: readonly string[],
    private readonly create: (labels: Record<string, string>) => Series,
  ) {}

  /** The series of these label values, in the order of the label names. */
  at(...values: (string | number)[]): Series {
    let level = this.root;
    const last = values.length - 1;
    for (let index = 0; index < last; index++) {
      let next = level.get(values[index]) as Map<string | number, unknown> | undefined;
      if (next === undefined) level.set(values[index], (next = new Map()));
      level = next;
    }
    let series = level.get(values[last]) as Series | undefined;
    if (series === undefined) {
      series = this.create(Object.fromEntries(this.labelNames.map((name, index) => [name, String(values[index])])));
      level.set(values[last], series);
      this.list.push(series);
    }
    return series;
  }

  get all(): readonly Series[] {
    return this.list;
  }

  clear(): void {
    this.root.clear();
    this.list.length = 0;
  }
}

interface HistogramSeries {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative); the last is above every bound (+Inf). */
  buckets: number[];
  sum: number;
  count: number;
}

/** A Prometheus histogram on a SeriesTable, with prom-client's bucket rule (value <= bound). */
class RequestHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series: SeriesTable<HistogramSeries>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[],
    private readonly upperBounds: readonly number[],
  ) {
    this.series = new SeriesTable(labelNames, (labels) => ({ labels, buckets: new Array<number>(upperBounds.length + 1).fill(0), sum: 0, count: 0 }));
  }

  observe(first: string, second: string, third: string | number, value: number): void {
    const series = this.series.at(first, second, third);
    let bucket = 0;
    while (bucket < this.upperBounds.length && value > this.upperBounds[bucket]) bucket++;
    series.buckets[bucket]++;
    series.sum += value;
    series.count++;
  }

  /** Observations in every series, and in those whose third label (the status code) is 5xx. */
  totals(): { requests: number; serverErrors: number } {
    let requests = 0;
    let serverErrors = 0;
    for (const { labels, count } of this.series.all) {
      requests += count;
      if (labels.status_code?.startsWith('5')) serverErrors += count;
    }
    return { requests, serverErrors };
  }

  async get() {
    const values = this.series.all.flatMap(({ labels, buckets, sum, count }) => {
      let cumulative = 0;
      return [
        ...this.upperBounds.map((bound, index) => ({
          labels: { ...labels, le: bound },
          value: (cumulative += buckets[index]),
          metricName: `${this.name}_bucket`,
        })),
        { labels: { ...labels, le: '+Inf' }, value: count, metricName: `${this.name}_bucket` },
        { labels, value: sum, metricName: `${this.name}_sum` },
        { labels, value: count, metricName: `${this.name}_count` },
      ];
    });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}

/** A Prometheus counter on a SeriesTable. */
class RequestCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  private readonly series: SeriesTable<{ labels: Record<string, string>; value: number }>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[],
  ) {
    this.series = new SeriesTable(labelNames, (labels) => ({ labels, value: 0 }));
  }

  inc(...labelValues: string[]): void {
    this.series.at(...labelValues).value++;
  }

  async get() {
    const values = this.series.all.map(({ labels, value }) => ({ labels, value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}
