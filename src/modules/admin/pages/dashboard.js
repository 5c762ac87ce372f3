// The dashboard: each part's health, refreshed every few seconds, and charts of the last hour.
import { useEffect, useLayoutEffect, useState } from './hooks.js';
import { api, html, jobCounts, StateBadge } from './ui.js';
import { LineChart } from './charts.js';

/** How often the dashboard asks for each part's health. */
const HEALTH_REFRESH_MS = 5000;
/** The charts' span, and how often they are asked for again (at least; more often than the samples is pointless). */
const CHART_MINUTES = 60;
const CHART_REFRESH_MS = 5000;

/**
 * Asked as this module is read, beside app.js's session request rather than after it: on a first
 * load the health shows one round trip sooner. Used by the first refresh only, and only when it
 * answered (a page showing the login form first asks again after the login).
 */
const healthAskedEarly = location.pathname === '/' ? { at: Date.now(), answer: api('GET', '/health') } : undefined;
let healthEarlyUsed = false;

async function askHealth() {
  if (healthAskedEarly && !healthEarlyUsed && Date.now() - healthAskedEarly.at < HEALTH_REFRESH_MS) {
    healthEarlyUsed = true;
    const answer = await healthAskedEarly.answer;
    if (answer.status === 200) return answer;
  }
  return api('GET', '/health');
}

/** The last hour of request and error rates, event backlog and job queue depth (GET /api/metrics/history). */
function Charts() {
  const [history, setHistory] = useState(null);
  const [error, setError] = useState('');
  useEffect(() => {
    let stopped = false;
    let timer;
    const refresh = async () => {
      const answer = await api('GET', `/metrics/history?minutes=${CHART_MINUTES}`);
      if (stopped) return;
      if (answer.status === 200) {
        setError('');
        setHistory({ ...answer.body, now: Date.now() });
      } else if (answer.status !== 401) {
        setError(answer.body.message || `The charts are unavailable (${answer.status})`);
      }
      const every = Math.max(CHART_REFRESH_MS, (answer.body.intervalSeconds ?? 0) * 1000);
      timer = setTimeout(refresh, every);
    };
    refresh();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  return html`<section class="charts-section" aria-labelledby="charts-title">
    <h2 id="charts-title">Last hour</h2>
    <p class="error" role="alert">${error}</p>
    ${
      history &&
      html`<p class="muted">
          Sampled every ${history.intervalSeconds} s by this instance (${history.instance.hostname}, pid ${history.instance.pid}); rates are its own, backlog
          and queue depth every instance's.
        </p>
        <div class="charts">
          ${history.series.map(
            (series) =>
              html`<${LineChart} key=${series.name} series=${series} timestamps=${history.timestamps} minutes=${history.minutes} now=${history.now} />`,
          )}
        </div>`
    }
  </section>`;
}

export function Dashboard() {
  const [health, setHealth] = useState(null);
  const [error, setError] = useState('');
  const [updatedAt, setUpdatedAt] = useState(null);

  // A layout effect runs as soon as the page is rendered, not after the next frame is painted: the first answer comes sooner.
  useLayoutEffect(() => {
    let stopped = false;
    const refresh = async () => {
      const answer = await askHealth();
      if (stopped) return;
      if (answer.status === 401) return location.reload();
      if (answer.status !== 200) return setError(answer.body.message || `Health is unavailable (${answer.status})`);
      setError('');
      setHealth(answer.body);
      setUpdatedAt(new Date());
    };
    refresh();
    const timer = setInterval(refresh, HEALTH_REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Dashboard</h1>
    <p class="error" role="alert">${error}</p>
    ${
      health &&
      html`<p class="summary" aria-live="polite">
          Overall: <${StateBadge} state=${health.status} /> · Plinth ${health.version} · CLI ${health.cliVersion}
          <span class="muted"> · updated ${updatedAt.toLocaleTimeString()}</span>
        </p>
        <ul class="cards">
          ${health.parts.map(
            (part) =>
              html`<li class="card" key=${part.name} data-part=${part.name}>
                <h2>${part.title}</h2>
                <p><${StateBadge} state=${part.state} /> <code>${part.name}</code></p>
                ${part.latencyMs !== undefined && html`<p>${part.latencyMs.toFixed(1)} ms</p>`} ${part.jobs && html`<p>${jobCounts(part.jobs)}</p>`}
                ${part.detail && html`<p class="muted">${part.detail}</p>`}
              </li>`,
          )}
        </ul>`
    }
    <${Charts} />
  </section>`;
}
