// The admin dashboard's pages: Preact with htm, plain ES modules served by the dashboard (no build step).
import { h, render } from './preact.js';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from './hooks.js';
import htm from './htm.js';

const html = htm.bind(h);

/** How often the dashboard asks for each part's health. */
const HEALTH_REFRESH_MS = 5000;
/** The log panel keeps this many lines: older ones scroll away. */
const LOG_LINES_SHOWN = 500;
/** A log line's fields the panel shows in their own place, or not at all (the process's). */
const SHOWN_APART = new Set(['level', 'time', 'pid', 'hostname', 'msg']);
const LEVEL_NAMES = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const PAGES = [
  { path: '/', title: 'Dashboard' },
  { path: '/services', title: 'Services' },
  { path: '/config', title: 'Configuration' },
];

/** The session's CSRF token, sent in X-CSRF-Token with every change. */
let csrfToken = '';

/** A call to the dashboard's API: its status, JSON body and Retry-After. Never throws for an HTTP error. */
async function api(method, route, body) {
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

function Login({ onLoggedIn }) {
  const [username, setUsername] = useState('admin');
  const [password, setPassword] = useState('');
  const [otp, setOtp] = useState('');
  const [otpNeeded, setOtpNeeded] = useState(false);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const otpInput = useRef(null);

  useEffect(() => {
    if (otpNeeded) otpInput.current?.focus();
  }, [otpNeeded]);

  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError('');
    const answer = await api('POST', '/auth/login', otpNeeded ? { username, password, otp } : { username, password });
    setBusy(false);
    if (answer.status === 200) return onLoggedIn(answer.body);
    if (answer.body.error_code === 'OTP_REQUIRED') {
      setOtpNeeded(true);
      return setError('Enter the 6-digit code of your authenticator app.');
    }
    setError(answer.body.message || `The login failed (${answer.status})`);
  };

  return html`<main class="login">
    <form onSubmit=${submit} aria-describedby=${error ? 'login-error' : undefined}>
      <h1>Plinth admin</h1>
      <label for="username">User name</label>
      <input id="username" name="username" autocomplete="username" required value=${username} onInput=${(event) => setUsername(event.target.value)} />
      <label for="password">Password</label>
      <input
        id="password"
        name="password"
        type="password"
        autocomplete="current-password"
        required
        value=${password}
        onInput=${(event) => setPassword(event.target.value)}
      />
      ${
        otpNeeded &&
        html`<label for="otp">Authenticator code</label>
          <input
            id="otp"
            name="otp"
            ref=${otpInput}
            inputmode="numeric"
            autocomplete="one-time-code"
            pattern="[0-9]{6}"
            maxlength="6"
            required
            value=${otp}
            onInput=${(event) => setOtp(event.target.value)}
          />`
      }
      <p id="login-error" class="error" role="alert">${error}</p>
      <button type="submit" disabled=${busy}>${busy ? 'Logging in…' : 'Log in'}</button>
    </form>
  </main>`;
}

function StateBadge({ state }) {
  return html`<span class=${`state state-${state}`}>${state}</span>`;
}

function jobCounts(jobs) {
  return jobs ? `${jobs.waiting} waiting, ${jobs.active} active, ${jobs.failed} failed, ${jobs.runningHere} running here` : '';
}

function Dashboard() {
  const [health, setHealth] = useState(null);
  const [error, setError] = useState('');
  const [updatedAt, setUpdatedAt] = useState(null);

  // A layout effect runs as soon as the page is rendered, not after the next frame is painted: the first answer comes sooner.
  useLayoutEffect(() => {
    let stopped = false;
    const refresh = async () => {
      const answer = await api('GET', '/health');
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
  </section>`;
}

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

function Services() {
  const [parts, setParts] = useState([]);
  const [message, setMessage] = useState('');
  const [busy, setBusy] = useState('');

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
    const answer = await api('POST', `/services/${encodeURIComponent(part.name)}/${action}`);
    setBusy('');
    if (answer.status === 200) {
      setParts((shown) => shown.map((each) => (each.name === part.name ? answer.body : each)));
      setMessage(`${part.title}: ${action} done, now ${answer.body.state}.`);
    } else {
      setMessage(answer.body.message || `${action} failed (${answer.status})`);
    }
  };

  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Services</h1>
    <p role="status" class="status">${message}</p>
    <table>
      <caption class="visually-hidden">
        Plinth's parts on this instance
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
              <td>${part.jobs ? jobCounts(part.jobs) : (part.detail ?? '')}</td>
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

function Configuration() {
  const [settings, setSettings] = useState([]);
  const [settingsFile, setSettingsFile] = useState('');
  const [filter, setFilter] = useState('');
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [result, setResult] = useState(null);
  const valueInput = useRef(null);

  const load = useCallback(async () => {
    const answer = await api('GET', '/config');
    if (answer.status === 401) return location.reload();
    if (answer.status === 200) {
      setSettings(answer.body.settings);
      setSettingsFile(answer.body.settingsFile);
    }
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const edit = (setting) => {
    setName(setting.name);
    setValue(setting.secret ? '' : (setting.fileValue ?? setting.value ?? ''));
    setResult(null);
    valueInput.current?.focus();
  };

  const save = async (event) => {
    event.preventDefault();
    const answer = await api('POST', '/config', { settings: { [name]: value === '' ? null : value } });
    if (answer.status === 200) {
      const restart = answer.body.restartRequired;
      const overridden = answer.body.overriddenByEnvironment;
      setResult({
        ok: true,
        text:
          `Saved ${answer.body.written.join(', ')} to ${answer.body.settingsFile}.` +
          (restart.length ? ` Needs restart: ${restart.join(', ')}.` : '') +
          (overridden.length ? ` Overridden by the environment: ${overridden.join(', ')}.` : ''),
      });
      await load();
    } else {
      setResult({ ok: false, text: answer.body.message || `Not saved (${answer.status})` });
    }
  };

  const needle = filter.trim().toLowerCase();
  const shown = needle ? settings.filter((setting) => `${setting.name} ${setting.area} ${setting.description}`.toLowerCase().includes(needle)) : settings;

  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Configuration</h1>
    <p class="muted">Settings file: <code>${settingsFile}</code>. Settings are read at start-up: a change applies at the next start.</p>
    <form class="edit" onSubmit=${save} aria-labelledby="edit-title">
      <h2 id="edit-title">Change a setting</h2>
      <label for="setting-name">Name</label>
      <input id="setting-name" list="setting-names" required value=${name} onInput=${(event) => setName(event.target.value.trim())} />
      <datalist id="setting-names">${settings.map((setting) => html`<option value=${setting.name} />`)}</datalist>
      <label for="setting-value">Value (empty unsets it)</label>
      <input id="setting-value" ref=${valueInput} value=${value} onInput=${(event) => setValue(event.target.value)} />
      <button type="submit">Save</button>
      <p role="alert" class=${result?.ok ? 'saved' : 'error'}>${result?.text ?? ''}</p>
    </form>
    <label for="setting-filter">Filter</label>
    <input id="setting-filter" type="search" value=${filter} onInput=${(event) => setFilter(event.target.value)} />
    <table class="settings">
      <caption class="visually-hidden">
        Every setting
      </caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Running value</th>
          <th scope="col">Settings file</th>
          <th scope="col">Source</th>
          <th scope="col"><span class="visually-hidden">Edit</span></th>
        </tr>
      </thead>
      <tbody>
        ${shown.map(
          (setting) =>
            html`<tr key=${setting.name} data-setting=${setting.name}>
              <th scope="row">
                <code>${setting.name}</code>
                <div class="muted">${setting.description}</div>
              </th>
              <td><code>${setting.value ?? '—'}</code></td>
              <td><code>${setting.fileValue ?? '—'}</code>${setting.pendingRestart && html` <span class="state state-stopped">needs restart</span>`}</td>
              <td>${setting.source}</td>
              <td><button type="button" aria-label=${`Edit ${setting.name}`} onClick=${() => edit(setting)}>Edit</button></td>
            </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}

function Shell({ session, onLoggedOut }) {
  const page = PAGES.find((each) => each.path === location.pathname) ?? PAGES[0];
  const logout = async () => {
    await api('POST', '/auth/logout');
    onLoggedOut();
  };
  useEffect(() => {
    document.title = `${page.title} · Plinth admin`;
  }, [page]);
  return html`<header class="top">
      <a class="skip" href="#content">Skip to content</a>
      <nav aria-label="Pages">
        <strong>Plinth admin</strong>
        ${PAGES.map((each) => html`<a href=${each.path} aria-current=${each === page ? 'page' : undefined}>${each.title}</a>`)}
      </nav>
      <span class="muted">${session.username}</span>
      <button type="button" onClick=${logout}>Log out</button>
    </header>
    <main id="content">
      ${page.path === '/' && html`<${Dashboard} />`} ${page.path === '/services' && html`<${Services} />`}
      ${page.path === '/config' && html`<${Configuration} />`}
    </main>`;
}

/** Asked while the modules are read, before the first render: the page shows one round trip sooner. */
const sessionAsked = api('GET', '/auth/session');

function App() {
  const [session, setSession] = useState(undefined);
  useEffect(() => {
    sessionAsked.then((answer) => {
      if (answer.status === 200) csrfToken = answer.body.csrfToken;
      setSession(answer.status === 200 ? answer.body : null);
    });
  }, []);
  if (session === undefined) return html`<p class="loading">Loading…</p>`;
  if (session === null) {
    return html`<${Login}
      onLoggedIn=${(answer) => {
        csrfToken = answer.csrfToken;
        setSession(answer);
      }}
    />`;
  }
  return html`<${Shell}
    session=${session}
    onLoggedOut=${() => {
      csrfToken = '';
      setSession(null);
    }}
  />`;
}

render(html`<${App} />`, document.getElementById('app'));
