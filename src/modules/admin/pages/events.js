// Events: triggers with their recent delivery attempts and a Redeliver button, cron triggers and scheduled events.
import { useEffect, useState } from './hooks.js';
import { api, html, StateBadge } from './ui.js';
import { Choice, Outcome, PAGE_SIZE, Pager, query, shortId, useRoute, when } from './areas-ui.js';

/** After a redelivery the attempts are read again this often, this many times: the new attempt shows without a reload. */
const FOLLOW_MS = 700;
const FOLLOW_TIMES = 8;
const REDELIVERED = {
  queued: 'queued again: it is delivered from its first try',
  'already-queued': 'already waiting to be delivered: nothing changed',
  'in-flight': 'being delivered right now: nothing changed',
};

function Invocations({ trigger }) {
  const [offset, setOffset] = useState(0);
  const [outcome, setOutcome] = useState({ text: '' });
  const [busy, setBusy] = useState('');
  const { body, error, reload } = useRoute(`/events/triggers/${encodeURIComponent(trigger)}/invocations${query({ limit: PAGE_SIZE, offset })}`);
  useEffect(() => setOffset(0), [trigger]);
  const redeliver = async (invocation) => {
    setBusy(invocation.id);
    const answer = await api('POST', `/events/events/${invocation.eventId}/redeliver`);
    setBusy('');
    if (answer.status !== 200) return setOutcome({ text: answer.body.message || `Redelivery failed (${answer.status})`, failed: true });
    setOutcome({ text: `Event ${invocation.eventId.slice(0, 8)} ${REDELIVERED[answer.body.outcome]}.` });
    for (let time = 0; time < FOLLOW_TIMES; time += 1) {
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
      await reload();
    }
  };
  return html`<section aria-labelledby="invocations-title">
    <h2 id="invocations-title">Recent attempts of <code>${trigger}</code></h2>
    <${Outcome} ...${outcome} />
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No delivery attempts yet.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Delivery attempts, newest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Attempt at</th>
              <th scope="col">Event</th>
              <th scope="col">Attempt</th>
              <th scope="col">Response</th>
              <th scope="col">Event now</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (invocation) =>
                html`<tr key=${invocation.id} data-event=${invocation.eventId} data-invocation=${invocation.id}>
                  <th scope="row">${when(invocation.createdAt)}</th>
                  <td>${shortId(invocation.eventId)} <span class="muted">${invocation.event.op}</span></td>
                  <td>${invocation.attempt}</td>
                  <td>
                    ${
                      invocation.status === null
                        ? html`<span class="state state-failed">no answer</span> <span class="muted">${invocation.error}</span>`
                        : html`<span class=${`state state-http-${Math.floor(invocation.status / 100)}xx`}>${invocation.status}</span>`
                    }
                    <span class="muted"> ${invocation.durationMs} ms</span>
                  </td>
                  <td><${StateBadge} state=${invocation.event.state.toLowerCase()} /> <span class="muted">tries: ${invocation.event.tries}</span></td>
                  <td class="actions">
                    <button
                      type="button"
                      disabled=${busy !== ''}
                      aria-label=${`Redeliver event ${invocation.eventId} (attempt ${invocation.attempt})`}
                      onClick=${() => redeliver(invocation)}
                    >
                      Redeliver
                    </button>
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Attempts" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
  </section>`;
}

function Scheduled() {
  const [offset, setOffset] = useState(0);
  const [status, setStatus] = useState('');
  const { body: cron } = useRoute(`/events/cron-triggers${query({ limit: 100 })}`);
  const { body, error } = useRoute(`/events/scheduled${query({ limit: PAGE_SIZE, offset, status })}`);
  return html`<section aria-labelledby="scheduled-title">
    <h2 id="scheduled-title">Cron triggers and scheduled events</h2>
    ${cron && cron.items.length === 0 && html`<p>No cron triggers.</p>`}
    ${
      cron &&
      cron.items.length > 0 &&
      html`<table>
        <caption class="visually-hidden">
          Cron triggers
        </caption>
        <thead>
          <tr>
            <th scope="col">Cron trigger</th>
            <th scope="col">Schedule</th>
            <th scope="col">Webhook</th>
            <th scope="col">Next</th>
          </tr>
        </thead>
        <tbody>
          ${cron.items.map(
            (trigger) =>
              html`<tr key=${trigger.name}>
                <th scope="row">${trigger.name}</th>
                <td><code>${trigger.schedule}</code></td>
                <td><code>${trigger.webhook}</code></td>
                <td>${when(trigger.nextScheduledTime)}</td>
              </tr>`,
          )}
        </tbody>
      </table>`
    }
    <div class="controls">
      <${Choice}
        id="scheduled-status"
        label="Status"
        value=${status}
        options=${[['', 'any'], ...['scheduled', 'locked', 'delivered', 'error', 'dead'].map((each) => [each, each])]}
        onChange=${(value) => {
          setOffset(0);
          setStatus(value);
        }}
      />
    </div>
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No scheduled events.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Scheduled events, latest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Scheduled for</th>
              <th scope="col">Event</th>
              <th scope="col">Cron trigger</th>
              <th scope="col">Status</th>
              <th scope="col">Tries</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (event) =>
                html`<tr key=${event.id}>
                  <th scope="row">${when(event.scheduledTime)}</th>
                  <td>${shortId(event.id)}</td>
                  <td>${event.cronTrigger ?? html`<span class="muted">one-off</span>`}</td>
                  <td><${StateBadge} state=${event.status} /></td>
                  <td>${event.tries}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Scheduled events" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
  </section>`;
}

export function Events() {
  const [offset, setOffset] = useState(0);
  const [shown, setShown] = useState('');
  const { body, error } = useRoute(`/events/triggers${query({ limit: PAGE_SIZE, offset })}`);
  const trigger = shown || body?.items[0]?.name;
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Events</h1>
    <p class="error" role="alert">${error}</p>
    ${body && body.total === 0 && html`<p>No event triggers: create one with the metadata API (pg_create_event_trigger).</p>`}
    ${
      body &&
      body.total > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Event triggers
          </caption>
          <thead>
            <tr>
              <th scope="col">Trigger</th>
              <th scope="col">Table</th>
              <th scope="col">Operations</th>
              <th scope="col">Webhook</th>
              <th scope="col">Pending</th>
              <th scope="col">Dead</th>
              <th scope="col">Attempts</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (each) =>
                html`<tr key=${each.name} data-trigger=${each.name} class=${each.name === trigger ? 'selected' : ''}>
                  <th scope="row">${each.name}</th>
                  <td><code>${each.table}</code></td>
                  <td>${each.operations.join(', ')}</td>
                  <td><code>${each.webhook ?? `from ${each.webhookFromEnv}`}</code></td>
                  <td>${each.pending}</td>
                  <td>${each.dead}</td>
                  <td>
                    <button type="button" aria-pressed=${each.name === trigger} onClick=${() => setShown(each.name)}>Show attempts of ${each.name}</button>
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Triggers" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
    ${trigger && html`<${Invocations} trigger=${trigger} />`}
    <${Scheduled} />
  </section>`;
}
