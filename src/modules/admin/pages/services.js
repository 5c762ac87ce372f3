// Services: Plinth's parts with their actions, and the live log panel.
import { useCallback, useEffect, useState } from './hooks.js';
import { api, html, jobCounts, StateBadge } from './ui.js';

/** The log panel keeps this many lines: older ones scroll away. */
const LOG_LINES_SHOWN = 500;
/** A log line's fields the panel shows in their own place, or not at all (the process's). */
const SHOWN_APART = new Set(['level', 'time', 'pid', 'hostname', 'msg']);
const LEVEL_NAMES = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** What a log line says besides its message, as name=value: what a person scanning the panel needs (the service, the action, the error). */
function lineFields(line) {
  return Object.entries(line)
    .filter(([name]) => !SHOWN_APART.has(name))
    .map(([name, value]) => `${name}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
}

function LogPanel({ parts }) {
  const [service, setService] = useState('all');
  const [level, setLevel] = useState('info');
  const [lines, setLines] = useState([]);
  const [connected, setConnected] = useState(false);

  useEffect(() => {
    setLines([]);
    const source = new EventSource(`/api/logs/${encodeURIComponent(service)}?level=${level}&tail=100`);
    source.onopen = () => setConnected(true);
    source.onerror = () => setConnected(false);
    source.addEventListener('log', (event) => {
      let line;
      try {
        line = JSON.parse(event.data);
      } catch {
        return;
      }
      setLines((shown) => [...shown.slice(-(LOG_LINES_SHOWN - 1)), { id: event.lastEventId, line }]);
    });
    return () => source.close();
  }, [service, level]);

  return html`<section aria-labelledby="logs-title" class="logs">
    <h2 id="logs-title">Live logs</h2>
    <div class="controls">
      <label for="log-service">Service</label>
      <select id="log-service" value=${service} onChange=${(event) => setService(event.target.value)}>
        <option value="all">all</option>
        ${parts.map((part) => html`<option value=${part.name}>${part.name}</option>`)}
      </select>
      <label for="log-level">Lowest level</label>
      <select id="log-level" value=${level} onChange=${(event) => setLevel(event.target.value)}>
        ${Object.values(LEVEL_NAMES).map((name) => html`<option value=${name}>${name}</option>`)}
      </select>
      <span class="muted">${connected ? 'streaming' : 'connecting…'}</span>
    </div>
    <div class="log-lines" role="log" aria-label="Log lines" tabindex="0">
      <ol>
        ${lines.map(
          ({ id, line }) =>
            html`<li key=${id} class=${`level-${LEVEL_NAMES[line.level] ?? 'info'}`}>
              <time>${new Date(line.time).toLocaleTimeString()}</time>
              <span class="level">${LEVEL_NAMES[line.level] ?? line.level}</span> ${' '}${line.msg}${' '}<span class="muted">${lineFields(line)}</span>
            </li>`,
        )}
      </ol>
    </div>
  </section>`;
}

export function Services() {
  const [parts, setParts] = useState([]);
  const [message, setMessage] = useState('');
  const [busy, setBusy] = useState('');
  const [scope, setScope] = useState('this');

  const load = useCallback(async () => {
    const answer = await api('GET', '/services');
    if (answer.status === 401) return location.reload();
    if (answer.status === 200) setParts(answer.body.services);
    else setMessage(answer.body.message || `Services are unavailable (${answer.status})`);
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const act = async (part, action) => {
    setBusy(`${part.name}/${action}`);
    const all = scope === 'all';
    const answer = await api('POST', `/services/${encodeURIComponent(part.name)}/${action}${all ? '?scope=all' : ''}`);
    setBusy('');
    if (answer.status === 200) {
      const { cluster, ...shown } = answer.body;
      setParts((listed) => listed.map((each) => (each.name === part.name ? shown : each)));
      setMessage(
        cluster
          ? `${part.title}: ${action} sent to all instances; ${cluster.instances.length} of ${cluster.expected} answered${cluster.timedOut ? ' before the wait ended' : ''}: ${cluster.instances
              .map((instance) => `${instance.hostname}:${instance.pid} ${instance.state ?? instance.error?.message ?? ''}`)
              .join(', ')}.`
          : `${part.title}: ${action} done, now ${shown.state}.`,
      );
    } else {
      setMessage(answer.body.message || `${action} failed (${answer.status})`);
    }
  };

  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Services</h1>
    <p role="status" class="status">${message}</p>
    <fieldset class="scope">
      <legend>Apply actions to</legend>
      <label><input type="radio" name="scope" value="this" checked=${scope === 'this'} onChange=${() => setScope('this')} /> this instance</label>
      <label><input type="radio" name="scope" value="all" checked=${scope === 'all'} onChange=${() => setScope('all')} /> all instances</label>
    </fieldset>
    <table>
      <caption class="visually-hidden">
        Plinth's parts and the custom services on this instance
      </caption>
      <thead>
        <tr>
          <th scope="col">Service</th>
          <th scope="col">State</th>
          <th scope="col">Detail</th>
          <th scope="col">Actions</th>
        </tr>
      </thead>
      <tbody>
        ${parts.map(
          (part) =>
            html`<tr key=${part.name} data-part=${part.name}>
              <th scope="row">${part.title} <code>${part.name}</code></th>
              <td><${StateBadge} state=${part.state} /></td>
              <td>
                ${part.jobs ? jobCounts(part.jobs) : (part.detail ?? '')}
                ${part.latencyMs !== undefined && part.name.startsWith('cs.') ? html` <span class="muted">(${part.latencyMs} ms)</span>` : ''}
                ${part.pausedOnAllInstances ? html` <strong class="everywhere">stopped on all instances</strong>` : ''}
              </td>
              <td class="actions">
                ${part.actions.map(
                  (action) =>
                    html`<button type="button" disabled=${busy !== ''} aria-label=${`${action} ${part.name}`} onClick=${() => act(part, action)}>
                      ${action}
                    </button>`,
                )}
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
    <${LogPanel} parts=${parts} />
  </section>`;
}
