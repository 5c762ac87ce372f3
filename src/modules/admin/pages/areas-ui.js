// What the pages of Plinth's own areas share (errors, events, jobs, newsletter): loading a route, paging, dates.
import { useCallback, useEffect, useState } from './hooks.js';
import { api, html } from './ui.js';

/** How many rows a page of these views shows. */
export const PAGE_SIZE = 20;

/** A time as this browser shows it, or a dash. */
export function when(value) {
  return value ? new Date(value).toLocaleString() : '—';
}

/** A long id shortened for a table (the whole one in its title). */
export function shortId(id) {
  return html`<code title=${id}>${String(id).slice(0, 8)}</code>`;
}

/**
 * The answer of GET `route` (reloaded whenever the route changes, or on reload()): the body when
 * 200, the message otherwise. A lost session shows the login form again.
 */
export function useRoute(route) {
  const [state, setState] = useState({ body: null, error: '', loading: true });
  const load = useCallback(async () => {
    if (!route) return setState({ body: null, error: '', loading: false });
    setState((current) => ({ ...current, loading: true }));
    const answer = await api('GET', route);
    if (answer.status === 401) return location.reload();
    if (answer.status === 200) setState({ body: answer.body, error: '', loading: false });
    else setState({ body: null, error: answer.body.message || `Unavailable (${answer.status})`, loading: false });
  }, [route]);
  useEffect(() => {
    load();
  }, [load]);
  return { ...state, reload: load };
}

/** A query string of the values set (empty ones left out). */
export function query(values) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** Previous and Next for a list paged by offset; `label` names the list for screen readers. */
export function Pager({ label, offset, count, hasMore, onOffset, size = PAGE_SIZE }) {
  if (offset === 0 && !hasMore) return null;
  return html`<nav class="pager" aria-label=${`${label} pages`}>
    <button type="button" disabled=${offset === 0} onClick=${() => onOffset(Math.max(0, offset - size))}>Previous</button>
    <span class="muted">${count === 0 ? 'none' : `${offset + 1}–${offset + count}`}</span>
    <button type="button" disabled=${!hasMore} onClick=${() => onOffset(offset + size)}>Next</button>
  </nav>`;
}

/** A change's outcome, read out by screen readers. */
export function Outcome({ text, failed }) {
  return html`<p role="status" class=${failed ? 'status error' : 'status saved'}>${text}</p>`;
}

/** A select with its label. */
export function Choice({ id, label, value, options, onChange }) {
  return html`<label for=${id}>${label}</label>
    <select id=${id} value=${value} onChange=${(event) => onChange(event.target.value)}>
      ${options.map(([optionValue, text]) => html`<option value=${optionValue}>${text}</option>`)}
    </select>`;
}
