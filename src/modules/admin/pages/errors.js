// Error tracking: projects, a project's grouped errors (filtered, paged), incidents and SLOs, and an error's details.
import { useState } from './hooks.js';
import { api, html, StateBadge } from './ui.js';
import { Choice, Outcome, PAGE_SIZE, Pager, query, shortId, useRoute, when } from './areas-ui.js';

const ANY = [['', 'any']];
const STATUSES = [...ANY, ['unresolved', 'unresolved'], ['resolved', 'resolved'], ['ignored', 'ignored']];
const LEVELS = [...ANY, ...['fatal', 'error', 'warning', 'info', 'debug'].map((level) => [level, level])];
const RANGES = [...ANY, ...['1h', '24h', '7d', '30d', '90d'].map((range) => [range, `last ${range}`])];
/** What each error status can move to, and the button's words. */
const ERROR_ACTIONS = { unresolved: ['resolve', 'ignore'], resolved: ['reopen'], ignored: ['reopen'] };
const INCIDENT_ACTIONS = { triggered: ['acknowledge', 'resolve'], acknowledged: ['resolve'], resolved: [] };

export function ErrorProjects() {
  const [offset, setOffset] = useState(0);
  const { body, error } = useRoute(`/errors/projects${query({ limit: PAGE_SIZE, offset })}`);
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Errors</h1>
    <p class="error" role="alert">${error}</p>
    ${body && body.total === 0 && html`<p>No error-tracking project yet: create one with the GraphQL API (createErrorProject).</p>`}
    ${
      body &&
      body.total > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Error-tracking projects
          </caption>
          <thead>
            <tr>
              <th scope="col">Project</th>
              <th scope="col">Service</th>
              <th scope="col">Open errors</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (project) =>
                html`<tr key=${project.id} data-project=${project.slug}>
                  <th scope="row"><a href=${`/errors/${project.id}`}>${project.name}</a> <code>${project.slug}</code></th>
                  <td>${project.service}</td>
                  <td>${project.openErrors}</td>
                  <td>${when(project.lastSeen)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Projects" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
  </section>`;
}

/** A list paged by cursor: the cursors of the pages before this one, to go back. */
function useCursor() {
  const [cursors, setCursors] = useState([]);
  const after = cursors[cursors.length - 1];
  return {
    after,
    next: (endCursor) => setCursors([...cursors, endCursor]),
    previous: () => setCursors(cursors.slice(0, -1)),
    reset: () => setCursors([]),
    first: cursors.length === 0,
  };
}

function CursorPager({ label, cursor, page }) {
  if (cursor.first && !page.hasMore) return null;
  return html`<nav class="pager" aria-label=${`${label} pages`}>
    <button type="button" disabled=${cursor.first} onClick=${cursor.previous}>Previous</button>
    <button type="button" disabled=${!page.hasMore} onClick=${() => cursor.next(page.endCursor)}>Next</button>
  </nav>`;
}

function ProjectErrors({ projectId }) {
  const [filter, setFilter] = useState({ status: 'unresolved', level: '', timeRange: '' });
  const cursor = useCursor();
  const { body, error } = useRoute(`/errors/projects/${projectId}/errors${query({ limit: PAGE_SIZE, ...filter, after: cursor.after })}`);
  const change = (name) => (value) => {
    cursor.reset();
    setFilter({ ...filter, [name]: value });
  };
  return html`<section aria-labelledby="errors-title">
    <h2 id="errors-title">Errors</h2>
    <div class="controls">
      <${Choice} id="error-status" label="Status" value=${filter.status} options=${STATUSES} onChange=${change('status')} />
      <${Choice} id="error-level" label="Level" value=${filter.level} options=${LEVELS} onChange=${change('level')} />
      <${Choice} id="error-range" label="Seen" value=${filter.timeRange} options=${RANGES} onChange=${change('timeRange')} />
    </div>
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No errors match.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Errors, newest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Error</th>
              <th scope="col">Level</th>
              <th scope="col">Status</th>
              <th scope="col">Events</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (item) =>
                html`<tr key=${item.id} data-error=${item.id}>
                  <th scope="row"><a href=${`/errors/${projectId}/${item.id}`}>${item.message}</a></th>
                  <td><${StateBadge} state=${item.level} /></td>
                  <td><${StateBadge} state=${item.status} /></td>
                  <td>${item.occurrenceCount}</td>
                  <td>${when(item.lastSeen)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${CursorPager} label="Errors" cursor=${cursor} page=${body} />`
    }
  </section>`;
}

function Incidents({ projectId }) {
  const cursor = useCursor();
  const [outcome, setOutcome] = useState({ text: '' });
  const { body, error, reload } = useRoute(`/errors/projects/${projectId}/incidents${query({ limit: PAGE_SIZE, after: cursor.after })}`);
  const act = async (incident, action) => {
    const answer = await api('POST', `/errors/incidents/${incident.id}/${action}`);
    setOutcome(answer.status === 200 ? { text: `${incident.title}: ${answer.body.status}.` } : { text: answer.body.message, failed: true });
    reload();
  };
  return html`<section aria-labelledby="incidents-title">
    <h2 id="incidents-title">Incidents</h2>
    <${Outcome} ...${outcome} />
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No incidents.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Incidents, newest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Incident</th>
              <th scope="col">Severity</th>
              <th scope="col">Status</th>
              <th scope="col">Opened</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (incident) =>
                html`<tr key=${incident.id} data-incident=${incident.id}>
                  <th scope="row">${incident.title} <span class="muted">${incident.service}</span></th>
                  <td>${incident.severity}</td>
                  <td><${StateBadge} state=${incident.status} /></td>
                  <td>${when(incident.createdAt)} <span class="muted">by ${incident.createdBy}</span></td>
                  <td class="actions">
                    ${INCIDENT_ACTIONS[incident.status].map(
                      (action) =>
                        html`<button type="button" aria-label=${`${action} incident ${incident.title}`} onClick=${() => act(incident, action)}>
                          ${action}
                        </button>`,
                    )}
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${CursorPager} label="Incidents" cursor=${cursor} page=${body} />`
    }
  </section>`;
}

function Slos({ projectId }) {
  const cursor = useCursor();
  const { body, error } = useRoute(`/errors/projects/${projectId}/slos${query({ limit: PAGE_SIZE, after: cursor.after })}`);
  return html`<section aria-labelledby="slos-title">
    <h2 id="slos-title">SLOs</h2>
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No SLOs.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Service level objectives
          </caption>
          <thead>
            <tr>
              <th scope="col">SLO</th>
              <th scope="col">Target</th>
              <th scope="col">Status</th>
              <th scope="col">Budget left</th>
              <th scope="col">Burn rate (1 h)</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (slo) =>
                html`<tr key=${slo.id}>
                  <th scope="row">${slo.name} <span class="muted">${slo.service}, ${slo.windowDays} days</span></th>
                  <td>${slo.targetPercentage}%</td>
                  <td><${StateBadge} state=${slo.status.toLowerCase()} /></td>
                  <td>${(slo.errorBudgetRemaining * 100).toFixed(1)}%</td>
                  <td>${slo.currentBurnRate.toFixed(2)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${CursorPager} label="SLOs" cursor=${cursor} page=${body} />`
    }
  </section>`;
}

export function ErrorProject({ projectId }) {
  const { body: projects } = useRoute(`/errors/projects${query({ limit: 100 })}`);
  const project = projects?.items.find((each) => String(each.id) === projectId);
  return html`<section aria-labelledby="page-title">
    <p><a href="/errors">All projects</a></p>
    <h1 id="page-title">Errors of ${project ? project.name : `project ${projectId}`}</h1>
    <${ProjectErrors} projectId=${projectId} />
    <${Incidents} projectId=${projectId} />
    <${Slos} projectId=${projectId} />
  </section>`;
}

export function ErrorDetails({ projectId, errorId }) {
  const { body, error, reload } = useRoute(`/errors/errors/${encodeURIComponent(errorId)}`);
  const [outcome, setOutcome] = useState({ text: '' });
  const act = async (action) => {
    const answer = await api('POST', `/errors/errors/${encodeURIComponent(errorId)}/${action}`);
    setOutcome(answer.status === 200 ? { text: `Now ${answer.body.status}.` } : { text: answer.body.message, failed: true });
    reload();
  };
  const latest = body?.events[0];
  return html`<section aria-labelledby="page-title">
    <p><a href=${`/errors/${projectId}`}>Back to the project's errors</a></p>
    <p class="error" role="alert">${error}</p>
    ${
      body &&
      html`<h1 id="page-title">${body.error.message}</h1>
        <p class="tags">
          <${StateBadge} state=${body.error.status} /> <${StateBadge} state=${body.error.level} /> ${
            latest?.environment && html`<span class="tag">environment: ${latest.environment}</span>`
          }
          ${latest?.release && html`<span class="tag">release: ${latest.release}</span>`}
          <span class="tag">project: ${body.project.slug}</span>
          ${body.error.type && html`<span class="tag">type: ${body.error.type}</span>`}
        </p>
        <p>
          ${body.error.occurrenceCount} events · first seen ${when(body.error.firstSeen)} · last seen ${when(body.error.lastSeen)}
          ${body.error.resolvedRelease && html` · resolved in ${body.error.resolvedRelease}`}
        </p>
        <div class="controls">
          ${ERROR_ACTIONS[body.error.status].map((action) => html`<button type="button" onClick=${() => act(action)}>${action}</button>`)}
        </div>
        <${Outcome} ...${outcome} />
        <h2>Stack of the latest event</h2>
        ${latest && latest.frames.length === 0 && html`<p>The event has no stack.</p>`}
        ${
          latest &&
          latest.frames.length > 0 &&
          html`<ol class="frames">
            ${[...latest.frames].reverse().map(
              (frame, index) =>
                html`<li key=${index} class=${frame.inApp ? 'in-app' : ''}>
                  <code>${frame.function || '?'}</code>${' '}
                  <span class="muted">${frame.filename || frame.module || ''}:${frame.lineno ?? '?'}:${frame.colno ?? '?'}</span>
                  ${frame.source && html`<pre>${frame.source}</pre>`}
                </li>`,
            )}
          </ol>`
        }
        <h2>Latest events</h2>
        <table>
          <caption class="visually-hidden">
            The error's latest events
          </caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">When</th>
              <th scope="col">Level</th>
              <th scope="col">Environment</th>
              <th scope="col">Release</th>
            </tr>
          </thead>
          <tbody>
            ${body.events.map(
              (event) =>
                html`<tr key=${event.eventId}>
                  <th scope="row">${shortId(event.eventId)}</th>
                  <td>${when(event.occurredAt)}</td>
                  <td>${event.level}</td>
                  <td>${event.environment ?? '—'}</td>
                  <td>${event.release ?? '—'}</td>
                </tr>`,
            )}
          </tbody>
        </table>`
    }
  </section>`;
}
