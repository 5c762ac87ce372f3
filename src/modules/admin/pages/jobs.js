// Jobs: each queue's jobs by state, a queue's jobs (failed first) with Retry and Cancel.
import { useState } from './hooks.js';
import { api, html, StateBadge } from './ui.js';
import { Choice, Outcome, PAGE_SIZE, Pager, query, shortId, useRoute, when } from './areas-ui.js';

const STATES = ['created', 'retry', 'active', 'completed', 'cancelled', 'failed'];
/** What can be done to a job in each state (the API refuses the rest with 409). */
const ACTIONS = { failed: ['retry'], cancelled: ['retry'], created: ['cancel'], retry: ['cancel'], active: ['cancel'] };
/** After a change the queue is read again this often, this many times: the job's run shows without a reload. */
const FOLLOW_MS = 700;
const FOLLOW_TIMES = 6;

function QueueJobs({ queue, onChanged }) {
  const [offset, setOffset] = useState(0);
  const [state, setState] = useState('');
  const [outcome, setOutcome] = useState({ text: '' });
  const [busy, setBusy] = useState('');
  const { body, error, reload } = useRoute(`/jobs/queues/${encodeURIComponent(queue)}/jobs${query({ limit: PAGE_SIZE, offset, state })}`);
  const act = async (job, action) => {
    setBusy(job.id);
    const answer = await api('POST', `/jobs/${job.id}/${action}`);
    setBusy('');
    if (answer.status !== 200) {
      setOutcome({ text: answer.body.message || `${action} failed (${answer.status})`, failed: true });
    } else {
      setOutcome({ text: `Job ${job.id.slice(0, 8)} ${action === 'retry' ? 'queued to run again' : 'cancelled'}.` });
    }
    for (let time = 0; time < FOLLOW_TIMES; time += 1) {
      await reload();
      onChanged();
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
    }
  };
  return html`<section aria-labelledby="jobs-title">
    <h2 id="jobs-title">Jobs of <code>${queue}</code></h2>
    <div class="controls">
      <${Choice}
        id="job-state"
        label="State"
        value=${state}
        options=${[['', 'any (failed first)'], ...STATES.map((each) => [each, each])]}
        onChange=${(value) => {
          setOffset(0);
          setState(value);
        }}
      />
    </div>
    <${Outcome} ...${outcome} />
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No jobs.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Jobs, failed first, then newest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">State</th>
              <th scope="col">Attempts</th>
              <th scope="col">Created</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
              <th scope="col">Error</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (job) =>
                html`<tr key=${job.id} data-job=${job.id}>
                  <th scope="row">${shortId(job.id)}</th>
                  <td><${StateBadge} state=${job.state} /></td>
                  <td>${job.retryCount + (job.startedOn ? 1 : 0)} <span class="muted">of ${job.retryLimit + 1}</span></td>
                  <td>${when(job.createdOn)}</td>
                  <td>${when(job.startedOn)}</td>
                  <td>${when(job.completedOn)}</td>
                  <td>${job.error ?? ''}</td>
                  <td class="actions">
                    ${(ACTIONS[job.state] ?? []).map(
                      (action) =>
                        html`<button type="button" disabled=${busy !== ''} aria-label=${`${action} job ${job.id}`} onClick=${() => act(job, action)}>
                          ${action === 'retry' ? 'Retry' : 'Cancel'}
                        </button>`,
                    )}
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Jobs" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
  </section>`;
}

export function Jobs() {
  const [shown, setShown] = useState('');
  const { body, error, reload } = useRoute('/jobs/queues');
  const queues = body?.queues ?? [];
  const queue = shown || queues.find((each) => each.counts.failed > 0)?.queue || queues[0]?.queue;
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Jobs</h1>
    <p class="error" role="alert">${error}</p>
    ${body && queues.length === 0 && html`<p>No job queues.</p>`}
    ${
      queues.length > 0 &&
      html`<table>
        <caption class="visually-hidden">
          Job queues with their jobs by state
        </caption>
        <thead>
          <tr>
            <th scope="col">Queue</th>
            ${STATES.map((state) => html`<th scope="col">${state}</th>`)}
            <th scope="col">Jobs</th>
          </tr>
        </thead>
        <tbody>
          ${queues.map(
            (each) =>
              html`<tr key=${each.queue} data-queue=${each.queue} class=${each.queue === queue ? 'selected' : ''}>
                <th scope="row">${each.queue} ${!each.declared && html`<span class="muted">(no module declares it)</span>`}</th>
                ${STATES.map((state) => html`<td class=${state === 'failed' && each.counts.failed > 0 ? 'error' : ''}>${each.counts[state]}</td>`)}
                <td><button type="button" aria-pressed=${each.queue === queue} onClick=${() => setShown(each.queue)}>Show jobs of ${each.queue}</button></td>
              </tr>`,
          )}
        </tbody>
      </table>`
    }
    ${queue && html`<${QueueJobs} key=${queue} queue=${queue} onChanged=${reload} />`}
  </section>`;
}
