// The newsletter: subscribers (searched, filtered, paged) with the counts per status, and the issues with the schedule.
import { useState } from './hooks.js';
import { html, StateBadge } from './ui.js';
import { Choice, PAGE_SIZE, Pager, query, useRoute, when } from './areas-ui.js';

function Subscribers() {
  const [offset, setOffset] = useState(0);
  const [filter, setFilter] = useState({ search: '', status: '', verified: '' });
  const [typed, setTyped] = useState('');
  const { body, error } = useRoute(`/newsletter/subscribers${query({ limit: PAGE_SIZE, offset, ...filter })}`);
  const change = (name) => (value) => {
    setOffset(0);
    setFilter({ ...filter, [name]: value });
  };
  return html`<section aria-labelledby="subscribers-title">
    <h2 id="subscribers-title">Subscribers</h2>
    ${body && !body.configured && html`<p class="error">The newsletter is not configured: nothing is sent (see the newsletter settings).</p>`}
    ${
      body &&
      html`<ul class="counts" aria-label="Subscribers per status">
        ${body.counts.map((count) => html`<li key=${count.status}><${StateBadge} state=${count.status} /> ${count.count} <span class="muted">(${count.verified} verified)</span></li>`)}
      </ul>`
    }
    <form
      class="controls"
      role="search"
      onSubmit=${(event) => {
        event.preventDefault();
        change('search')(typed.trim());
      }}
    >
      <label for="subscriber-search">Address</label>
      <input id="subscriber-search" type="search" value=${typed} maxlength="254" onInput=${(event) => setTyped(event.target.value)} />
      <button type="submit">Search</button>
      <${Choice}
        id="subscriber-status"
        label="Status"
        value=${filter.status}
        options=${[
          ['', 'any'],
          ['pending', 'pending'],
          ['active', 'active'],
          ['unsubscribed', 'unsubscribed'],
        ]}
        onChange=${change('status')}
      />
      <${Choice}
        id="subscriber-verified"
        label="Verified"
        value=${filter.verified}
        options=${[
          ['', 'any'],
          ['true', 'verified'],
          ['false', 'not verified'],
        ]}
        onChange=${change('verified')}
      />
    </form>
    <p class="error" role="alert">${error}</p>
    ${body && html`<p class="muted" aria-live="polite">${body.total} matching</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Subscribers, newest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Address</th>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Verified</th>
              <th scope="col">Source</th>
              <th scope="col">Signed up</th>
              <th scope="col">Subscribed</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (subscriber) =>
                html`<tr key=${subscriber.id} data-subscriber=${subscriber.email}>
                  <th scope="row">${subscriber.email}</th>
                  <td>${subscriber.name ?? ''}</td>
                  <td><${StateBadge} state=${subscriber.status} /></td>
                  <td>${subscriber.is_verified ? 'yes' : 'no'}</td>
                  <td>${subscriber.source ?? ''}</td>
                  <td>${when(subscriber.created_at)}</td>
                  <td>${when(subscriber.subscribed_at)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Subscribers" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
  </section>`;
}

function Issues() {
  const [offset, setOffset] = useState(0);
  const { body, error } = useRoute(`/newsletter/issues${query({ limit: PAGE_SIZE, offset })}`);
  const schedule = body?.schedule;
  return html`<section aria-labelledby="issues-title">
    <h2 id="issues-title">Issues</h2>
    ${
      schedule &&
      html`<p>
        ${
          schedule.scheduled
            ? html`Scheduled: an issue every ${schedule.intervalDays} days${schedule.nextDueAt ? html`, the next one due ${when(schedule.nextDueAt)}` : ''}.`
            : 'No schedule: issues are sent by hand (NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE is not set).'
        }
      </p>`
    }
    <p class="error" role="alert">${error}</p>
    ${body && body.items.length === 0 && html`<p>No issues sent yet.</p>`}
    ${
      body &&
      body.items.length > 0 &&
      html`<table>
          <caption class="visually-hidden">
            Issues, newest first
          </caption>
          <thead>
            <tr>
              <th scope="col">Issue</th>
              <th scope="col">Status</th>
              <th scope="col">Recipients</th>
              <th scope="col">Sent</th>
              <th scope="col">Pending</th>
              <th scope="col">Skipped</th>
              <th scope="col">Failed</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
            </tr>
          </thead>
          <tbody>
            ${body.items.map(
              (issue) =>
                html`<tr key=${issue.id} data-issue=${issue.issue_number}>
                  <th scope="row">#${issue.issue_number} <span class="muted">by ${issue.requested_by}</span></th>
                  <td><${StateBadge} state=${issue.status} /></td>
                  <td>${issue.recipients}</td>
                  <td>${issue.sent}</td>
                  <td>${issue.pending}</td>
                  <td>${issue.skipped}</td>
                  <td class=${issue.failed > 0 ? 'error' : ''}>${issue.failed}</td>
                  <td>${when(issue.created_at)}</td>
                  <td>${when(issue.completed_at)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        <${Pager} label="Issues" offset=${offset} count=${body.items.length} hasMore=${body.hasMore} onOffset=${setOffset} />`
    }
  </section>`;
}

export function Newsletter() {
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Newsletter</h1>
    <${Subscribers} />
    <${Issues} />
  </section>`;
}
