/** One sample of the Prometheus text exposition format. */
export interface PrometheusSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * Parses the text format (version 0.0.4) strictly: every line is a comment, blank, or a sample;
 * anything else throws, so a malformed exposition fails the test that reads it.
 */
export function parsePrometheus(text: string): PrometheusSample[] {
  const samples: PrometheusSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(LABEL)) labels[name] = value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    // Prometheus reads values with Go's ParseFloat, which takes NaN and Inf in any case.
    const text = match[3].toLowerCase();
    const value = text === '+inf' || text === 'inf' ? Infinity : text === '-inf' ? -Infinity : Number(match[3]);
    if (Number.isNaN(value) && text !== 'nan') throw new Error(`not a sample value: ${line}`);
    samples.push({ name: match[1], labels, value });
  }
  return samples;
}

/** The value of the one sample with this name and (at least) these labels; undefined when absent. */
export function sampleValue(samples: PrometheusSample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))?.value;
}
