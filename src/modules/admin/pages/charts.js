// Small line charts in hand-written SVG (no charting library: four sparklines need a few lines, not 50 KB).
import { useState } from './hooks.js';
import { html } from './ui.js';

const WIDTH = 320;
const HEIGHT = 96;
const PAD = { top: 8, right: 6, bottom: 18, left: 6 };

/** A value as the charts show it: whole numbers for counts, up to two decimals for rates. */
export function formatValue(value) {
  if (value === null || value === undefined) return 'no data';
  if (Number.isInteger(value)) return String(value);
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

/** The smallest "round" number at or above `value` (1, 2, 5 × 10^n): the chart's top. */
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

/** Latest, min and max of the values read (nulls are gaps). */
export function summarize(values) {
  const read = values.filter((value) => value !== null);
  if (read.length === 0) return null;
  return { latest: read[read.length - 1], min: Math.min(...read), max: Math.max(...read) };
}

/** The path of the line: a gap where a value is missing. */
function linePath(points) {
  let path = '';
  let drawing = false;
  for (const point of points) {
    if (!point) {
      drawing = false;
      continue;
    }
    path += `${drawing ? 'L' : 'M'}${point[0].toFixed(1)},${point[1].toFixed(1)}`;
    drawing = true;
  }
  return path;
}

/** The area under the line, down to `baseline`: one shape per stretch without a gap. */
function areaPath(points, baseline) {
  const shapes = [];
  let stretch = [];
  for (const point of [...points, null]) {
    if (point) {
      stretch.push(point);
      continue;
    }
    if (stretch.length > 1) {
      const first = stretch[0];
      const last = stretch[stretch.length - 1];
      shapes.push(
        `M${first[0].toFixed(1)},${baseline}${stretch.map((each) => `L${each[0].toFixed(1)},${each[1].toFixed(1)}`).join('')}L${last[0].toFixed(1)},${baseline}Z`,
      );
    }
    stretch = [];
  }
  return shapes.join('');
}

/**
 * One series of the last `minutes`: its line over time (now at the right), its latest value and
 * its range as text (the chart's text alternative), and the value under the pointer.
 */
export function LineChart({ series, timestamps, minutes, now }) {
  const [hover, setHover] = useState(null);
  const summary = summarize(series.values);
  const top = niceMax(summary ? summary.max : 0);
  // A younger instance has less than the hour: the chart spans what it has (a minute at least).
  const start = Math.min(Math.max(now - minutes * 60_000, timestamps.length ? timestamps[0] : 0), now - 60_000);
  const spanMinutes = Math.max(1, Math.round((now - start) / 60_000));
  const innerWidth = WIDTH - PAD.left - PAD.right;
  const innerHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (timestamp) => PAD.left + ((timestamp - start) / (now - start)) * innerWidth;
  const y = (value) => PAD.top + innerHeight - (value / top) * innerHeight;
  const points = series.values.map((value, index) => (value === null || timestamps[index] < start ? null : [x(timestamps[index]), y(value)]));
  const line = linePath(points);
  // Counts need no unit beside the title (backlog, queue depth); rates do.
  const unit = series.unit === 'per second' ? '/s' : '';
  const described = summary
    ? `${series.title} (${series.unit}) over the last ${spanMinutes} minute${spanMinutes === 1 ? '' : 's'}: latest ${formatValue(summary.latest)}, min ${formatValue(summary.min)}, max ${formatValue(summary.max)}`
    : `${series.title}: no samples yet`;

  const onMove = (event) => {
    const box = event.currentTarget.getBoundingClientRect();
    const at = start + ((event.clientX - box.left) / box.width) * (now - start);
    let nearest = -1;
    timestamps.forEach((timestamp, index) => {
      if (series.values[index] !== null && (nearest < 0 || Math.abs(timestamp - at) < Math.abs(timestamps[nearest] - at))) nearest = index;
    });
    setHover(nearest < 0 ? null : nearest);
  };

  return html`<figure class="chart" data-series=${series.name}>
    <figcaption>
      <span class="chart-title">${series.title}</span>
      <span class="chart-latest">${summary ? `${formatValue(summary.latest)}${unit}` : '—'}</span>
      <span class="muted chart-scope" title=${series.description}>${series.scope === 'cluster' ? 'all instances' : 'this instance'}</span>
    </figcaption>
    <svg
      viewBox=${`0 0 ${WIDTH} ${HEIGHT}`}
      preserveAspectRatio="none"
      role="img"
      aria-label=${described}
      onPointerMove=${onMove}
      onPointerLeave=${() => setHover(null)}
    >
      <line class="chart-axis" x1=${PAD.left} x2=${WIDTH - PAD.right} y1=${PAD.top + innerHeight} y2=${PAD.top + innerHeight} />
      <line class="chart-grid" x1=${PAD.left} x2=${WIDTH - PAD.right} y1=${PAD.top} y2=${PAD.top} />
      ${line && html`<path class="chart-area" d=${areaPath(points, PAD.top + innerHeight)} />`}
      ${line && html`<path class="chart-line" d=${line} vector-effect="non-scaling-stroke" />`}
      ${
        hover !== null &&
        points[hover] &&
        html`<line
          class="chart-cursor"
          x1=${points[hover][0]}
          x2=${points[hover][0]}
          y1=${PAD.top}
          y2=${PAD.top + innerHeight}
          vector-effect="non-scaling-stroke"
        />`
      }
    </svg>
    <p class="chart-range muted">
      ${
        hover !== null && timestamps[hover] !== undefined
          ? html`<span class="chart-readout">${new Date(timestamps[hover]).toLocaleTimeString()}: ${formatValue(series.values[hover])}${unit}</span>`
          : html`<span>−${spanMinutes} min</span>`
      }
      <span>${summary ? `min ${formatValue(summary.min)} · max ${formatValue(summary.max)} · top ${formatValue(top)}` : 'no samples yet'}</span>
      <span>now</span>
    </p>
  </figure>`;
}
