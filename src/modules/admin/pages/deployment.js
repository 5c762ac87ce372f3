// Deployment: each environment's command, a deploy button with a confirmation, the live output and the history of runs.
import { useCallback, useEffect, useRef, useState } from './hooks.js';
import { api, html } from './ui.js';

const TITLES = { staging: 'Staging', production: 'Production' };
const PAGE_OF = { staging: '/deployment/staging', production: '/deployment/prod' };
const STATUS_CLASS = {
  running: 'state-running',
  succeeded: 'state-ok',
  failed: 'state-unavailable',
  'timed-out': 'state-unavailable',
  interrupted: 'state-stopped',
};
/** The output panel keeps this many lines. */
const LINES_SHOWN = 2000;

function RunStatus({ status }) {
  return html`<span class=${`state ${STATUS_CLASS[status] ?? ''}`}>${status}</span>`;
}

function duration(run) {
  return run.durationMs === null ? '' : `${(run.durationMs / 1000).toFixed(1)} s`;
}

function History({ runs, showEnvironment, onShow }) {
  if (runs.length === 0) return html`<p class="muted">No deployment yet.</p>`;
  return html`<table>
    <caption class="visually-hidden">
      Deployment runs, newest first
    </caption>
    <thead>
      <tr>
        <th scope="col">Run</th>
        ${showEnvironment ? html`<th scope="col">Environment</th>` : ''}
        <th scope="col">Status</th>
        <th scope="col">Exit code</th>
        <th scope="col">Started</th>
        <th scope="col">Ended</th>
        <th scope="col">By</th>
        <th scope="col">Output</th>
      </tr>
    </thead>
    <tbody>
      ${runs.map(
        (run) =>
          html`<tr key=${run.id} data-run=${run.id}>
            <th scope="row">#${run.id}</th>
            ${showEnvironment ? html`<td><a href=${PAGE_OF[run.environment]}>${run.environment}</a></td>` : ''}
            <td><${RunStatus} status=${run.status} /></td>
            <td>${run.exitCode ?? ''}</td>
            <td>${new Date(run.startedAt).toLocaleString()}</td>
            <td>${run.endedAt ? `${new Date(run.endedAt).toLocaleString()} (${duration(run)})` : ''}</td>
            <td>${run.startedBy}</td>
            <td><button type="button" aria-label=${`Show the output of run ${run.id}`} onClick=${() => onShow(run.id)}>Show</button></td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** A run's output, streamed while it runs (Server-Sent Events), then its end. */
function Output({ runId, onEnd }) {
  const [lines, setLines] = useState([]);
  const [end, setEnd] = useState(null);
  const panel = useRef(null);
  useEffect(() => {
    setLines([]);
    setEnd(null);
    const source = new EventSource(`/api/deploy/runs/${runId}/output`);
    source.addEventListener('line', (event) => {
      const line = JSON.parse(event.data);
      setLines((shown) => [...shown.slice(-(LINES_SHOWN - 1)), { seq: Number(event.lastEventId), ...line }]);
    });
    source.addEventListener('end', (event) => {
      source.close();
      const run = JSON.parse(event.data);
      setEnd(run);
      onEnd?.(run);
    });
    return () => source.close();
  }, [runId]);
  useEffect(() => {
    if (panel.current) panel.current.scrollTop = panel.current.scrollHeight;
  }, [lines]);
  return html`<section aria-labelledby="output-title" class="logs">
    <h2 id="output-title">Output of run #${runId}</h2>
    <p role="status">${end ? html`Ended: <${RunStatus} status=${end.status} />${end.exitCode === null ? '' : ` exit code ${end.exitCode}`}` : 'Running…'}</p>
    <div class="log-lines" role="log" aria-label=${`Output of run ${runId}`} tabindex="0" ref=${panel}>
      <ol>
        ${lines.map((line) => html`<li key=${line.seq} class=${`output-${line.stream}`}>${line.text}</li>`)}
      </ol>
    </div>
  </section>`;
}

function useDeployments(environment) {
  const [environments, setEnvironments] = useState(undefined);
  const [runs, setRuns] = useState([]);
  const load = useCallback(async () => {
    const [configured, history] = await Promise.all([
      api('GET', '/deploy/environments'),
      api('GET', environment ? `/deploy/runs?environment=${environment}` : '/deploy/runs'),
    ]);
    if (configured.status === 401) return location.reload();
    if (configured.status === 200) setEnvironments(configured.body);
    if (history.status === 200) setRuns(history.body.runs);
  }, [environment]);
  useEffect(() => {
    load();
  }, [load]);
  return { environments, runs, load };
}

function DeployButton({ environment, configured, running, onStarted }) {
  const [confirming, setConfirming] = useState(false);
  const [message, setMessage] = useState('');
  const deploy = async () => {
    setConfirming(false);
    const answer = await api('POST', `/deploy/${environment}`);
    if (answer.status === 202) {
      setMessage('');
      onStarted(answer.body);
    } else {
      setMessage(answer.body.message || `Not started (${answer.status})`);
    }
  };
  if (!configured) return html`<p class="muted">Not configured: set <code>PLATFORM_DEPLOY_${environment.toUpperCase()}_COMMAND</code>.</p>`;
  return html`<div class="controls">
    ${
      confirming
        ? html`<span role="alert">Deploy to ${environment} now?</span>
            <button type="button" class="danger" onClick=${deploy}>Yes, deploy</button>
            <button type="button" onClick=${() => setConfirming(false)}>Cancel</button>`
        : html`<button type="button" disabled=${running} onClick=${() => setConfirming(true)}>Deploy to ${environment}</button>`
    }
    ${running ? html`<span class="muted">Run #${running.id} (${running.environment}) is running.</span>` : ''}
    <span role="status" class="error">${message}</span>
  </div>`;
}

export function DeploymentEnvironment({ environment }) {
  const { environments, runs, load } = useDeployments(environment);
  const [shown, setShown] = useState(null);
  useEffect(() => {
    if (shown === null && environments?.running?.environment === environment) setShown(environments.running.id);
  }, [environments]);
  if (environments === undefined) return html`<p class="loading">Loading…</p>`;
  const settings = environments.environments.find((each) => each.environment === environment);
  return html`<section aria-labelledby="page-title">
    <p><a href="/deployment/environments">All environments</a></p>
    <h1 id="page-title">Deploy to ${TITLES[environment]}</h1>
    ${
      settings.configured
        ? html`<p>Command <code>${settings.command}</code> in <code>${settings.workingDirectory}</code>, stopped after ${settings.timeoutSeconds} s.</p>`
        : ''
    }
    <${DeployButton}
      environment=${environment}
      configured=${settings.configured}
      running=${environments.running}
      onStarted=${(run) => {
        setShown(run.id);
        load();
      }}
    />
    ${shown === null ? '' : html`<${Output} runId=${shown} onEnd=${load} />`}
    <h2>History</h2>
    <${History} runs=${runs} showEnvironment=${false} onShow=${setShown} />
  </section>`;
}

export const StagingDeployment = () => html`<${DeploymentEnvironment} environment="staging" />`;
export const ProductionDeployment = () => html`<${DeploymentEnvironment} environment="production" />`;

export function DeploymentEnvironments() {
  const { environments, runs, load } = useDeployments(undefined);
  const [shown, setShown] = useState(null);
  if (environments === undefined) return html`<p class="loading">Loading…</p>`;
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Deployment environments</h1>
    <table>
      <caption class="visually-hidden">
        Environments and their deploy commands
      </caption>
      <thead>
        <tr>
          <th scope="col">Environment</th>
          <th scope="col">Command</th>
          <th scope="col">Deploy</th>
        </tr>
      </thead>
      <tbody>
        ${environments.environments.map(
          (each) =>
            html`<tr key=${each.environment}>
              <th scope="row"><a href=${PAGE_OF[each.environment]}>${TITLES[each.environment]}</a></th>
              <td>${each.configured ? html`<code>${each.command}</code>` : html`<span class="muted">not configured</span>`}</td>
              <td>
                <${DeployButton}
                  environment=${each.environment}
                  configured=${each.configured}
                  running=${environments.running}
                  onStarted=${(run) => {
                    setShown(run.id);
                    load();
                  }}
                />
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${shown === null ? '' : html`<${Output} runId=${shown} onEnd=${load} />`}
    <h2>History</h2>
    <${History} runs=${runs} showEnvironment=${true} onShow=${setShown} />
  </section>`;
}
