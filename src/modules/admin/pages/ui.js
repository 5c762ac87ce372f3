// What every page of the dashboard uses: the html tag, the API call and the small shared pieces.
import { h } from './preact.js';
import htm from './htm.js';

export const html = htm.bind(h);

/** The session's CSRF token, sent in X-CSRF-Token with every change. */
let csrfToken = '';

/** Set at login and from the session; cleared at logout. */
export function setCsrfToken(token) {
  csrfToken = token;
}

/** A call to the dashboard's API: its status, JSON body and Retry-After. Never throws for an HTTP error. */
export async function api(method, route, body) {
  const headers = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(`/api${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  } catch {
    return { status: 0, body: { message: 'The dashboard cannot be reached' } };
  }
  const text = await response.text();
  let parsed = {};
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { message: text };
  }
  return { status: response.status, body: parsed, retryAfter: response.headers.get('retry-after') };
}

export function StateBadge({ state }) {
  return html`<span class=${`state state-${state}`}>${state}</span>`;
}

export function jobCounts(jobs) {
  return jobs ? `${jobs.waiting} waiting, ${jobs.active} active, ${jobs.failed} failed, ${jobs.runningHere} running here` : '';
}
