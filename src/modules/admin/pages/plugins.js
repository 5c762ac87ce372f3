// Plugins: a grid of the installed plugins with an install form, and one plugin's page (manifest, routes, sync, webhook events).
import { useCallback, useEffect, useState } from './hooks.js';
import { api, html } from './ui.js';

function PluginState({ plugin }) {
  return html`<span class=${`state ${plugin.valid ? 'state-ok' : 'state-unavailable'}`}>${plugin.valid ? 'valid' : 'invalid'}</span>`;
}

function SyncResult({ sync }) {
  if (!sync) return html`<p class="muted">Never synced.</p>`;
  return html`<p>
    <span class=${sync.ok ? 'saved' : 'error'}>${sync.ok ? 'Synced' : 'Sync failed'}</span>
    ${' '}${new Date(sync.syncedAt).toLocaleString()} by ${sync.syncedBy} (${sync.durationMs} ms): ${sync.message}
  </p>`;
}

export function Plugins() {
  const [plugins, setPlugins] = useState(undefined);
  const [source, setSource] = useState('');
  const [result, setResult] = useState(null);
  const [busy, setBusy] = useState(false);

  const load = useCallback(async () => {
    const answer = await api('GET', '/plugins');
    if (answer.status === 401) return location.reload();
    setPlugins(answer.status === 200 ? answer.body.plugins : []);
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const install = async (event) => {
    event.preventDefault();
    setBusy(true);
    const answer = await api('POST', '/plugins/install', { source: source.trim() });
    setBusy(false);
    if (answer.status === 201) {
      setResult({ ok: true, text: `Installed ${answer.body.name} (${answer.body.routes.length} route(s)).` });
      setSource('');
      await load();
    } else {
      setResult({ ok: false, text: answer.body.message || `Not installed (${answer.status})` });
    }
  };

  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Plugins</h1>
    <form class="edit" onSubmit=${install} aria-labelledby="install-title">
      <h2 id="install-title">Install a plugin</h2>
      <label for="plugin-source">Folder or .tar.gz archive on the server</label>
      <input
        id="plugin-source"
        class="wide"
        value=${source}
        required
        placeholder="/srv/plugins/reports.tgz"
        onInput=${(event) => setSource(event.target.value)}
      />
      <button type="submit" disabled=${busy}>Install</button>
      <p role="status" class=${result ? (result.ok ? 'saved' : 'error') : ''}>${result?.text ?? ''}</p>
    </form>
    ${
      plugins === undefined
        ? html`<p class="loading">Loading…</p>`
        : plugins.length === 0
          ? html`<p>No plugin is installed.</p>`
          : html`<ul class="cards" aria-label="Installed plugins">
              ${plugins.map(
                (plugin) =>
                  html`<li class="card" key=${plugin.folder}>
                    <h2><a href=${`/plugins/${encodeURIComponent(plugin.name)}`}>${plugin.name}</a></h2>
                    <p><${PluginState} plugin=${plugin} /> ${plugin.version ? html`<span class="muted">v${plugin.version}</span>` : ''}</p>
                    <p>${plugin.description ?? ''}</p>
                    <p class="muted">${plugin.routes.length} route(s) · ${plugin.webhooks.length} webhook event(s)${plugin.sync ? ' · sync endpoint' : ''}</p>
                    ${plugin.valid ? '' : html`<p class="error">${plugin.problems[0]}</p>`}
                  </li>`,
              )}
            </ul>`
    }
  </section>`;
}

export function Plugin({ name }) {
  const [plugin, setPlugin] = useState(undefined);
  const [webhooks, setWebhooks] = useState([]);
  const [message, setMessage] = useState(null);
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(false);

  const load = useCallback(async () => {
    const answer = await api('GET', `/plugins/${encodeURIComponent(name)}`);
    if (answer.status === 401) return location.reload();
    if (answer.status !== 200) return setPlugin(null);
    setPlugin(answer.body);
    const hooks = await api('GET', `/plugins/${encodeURIComponent(name)}/webhooks`);
    if (hooks.status === 200) setWebhooks(hooks.body.webhooks);
  }, [name]);
  useEffect(() => {
    load();
  }, [load]);

  const sync = async () => {
    setBusy(true);
    const answer = await api('POST', `/plugins/${encodeURIComponent(name)}/sync`);
    setBusy(false);
    if (answer.status === 200) {
      setMessage(null);
      setPlugin(answer.body.plugin);
    } else {
      setMessage({ ok: false, text: answer.body.message || `Sync failed (${answer.status})` });
      await load();
    }
  };

  const remove = async () => {
    setBusy(true);
    const answer = await api('DELETE', `/plugins/${encodeURIComponent(name)}`);
    setBusy(false);
    setConfirming(false);
    if (answer.status === 200) location.assign('/plugins');
    else setMessage({ ok: false, text: answer.body.message || `Not removed (${answer.status})` });
  };

  if (plugin === undefined) return html`<p class="loading">Loading…</p>`;
  if (plugin === null) {
    return html`<section aria-labelledby="page-title">
      <h1 id="page-title">No plugin ${name}</h1>
      <p><a href="/plugins">All plugins</a></p>
    </section>`;
  }
  return html`<section aria-labelledby="page-title">
    <p><a href="/plugins">All plugins</a></p>
    <h1 id="page-title">${plugin.name} ${plugin.version ? html`<span class="muted">v${plugin.version}</span>` : ''}</h1>
    <p><${PluginState} plugin=${plugin} /> ${plugin.description ?? ''}</p>
    ${
      plugin.valid
        ? ''
        : html`<ul class="error" aria-label="Manifest problems">
            ${plugin.problems.map((problem) => html`<li>${problem}</li>`)}
          </ul>`
    }
    <dl class="facts">
      <dt>Folder</dt>
      <dd><code>${plugin.path}</code></dd>
      <dt>Sync endpoint</dt>
      <dd>${plugin.sync ? html`<code>${plugin.sync}</code>` : html`<span class="muted">none: a sync reads the manifest again</span>`}</dd>
    </dl>
    <div class="controls">
      <button type="button" onClick=${sync} disabled=${busy}>Sync now</button>
      ${
        confirming
          ? html`<span role="alert">Remove ${plugin.name} and its folder?</span>
              <button type="button" class="danger" onClick=${remove} disabled=${busy}>Yes, remove</button>
              <button type="button" onClick=${() => setConfirming(false)}>Cancel</button>`
          : html`<button type="button" class="danger" onClick=${() => setConfirming(true)} disabled=${busy}>Remove</button>`
      }
    </div>
    <div role="status" class="sync-result">${message ? html`<p class="error">${message.text}</p>` : html`<${SyncResult} sync=${plugin.lastSync} />`}</div>
    <h2>Routes</h2>
    ${
      plugin.routes.length === 0
        ? html`<p class="muted">The manifest declares no route.</p>`
        : html`<table>
            <caption class="visually-hidden">
              The plugin's REST routes, shown in the API reference
            </caption>
            <thead>
              <tr>
                <th scope="col">Method</th>
                <th scope="col">Path</th>
                <th scope="col">Summary</th>
              </tr>
            </thead>
            <tbody>
              ${plugin.routes.map(
                (route) =>
                  html`<tr key=${`${route.method} ${route.path}`}>
                    <td><code>${route.method}</code></td>
                    <td><code>${route.path}</code></td>
                    <td>${route.summary}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    <h2>Webhook events</h2>
    ${
      webhooks.length === 0
        ? html`<p class="muted">The manifest declares no webhook event.</p>`
        : html`<table>
            <caption class="visually-hidden">
              The events the plugin receives
            </caption>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Event trigger</th>
                <th scope="col">Recent events</th>
              </tr>
            </thead>
            <tbody>
              ${webhooks.map(
                (hook) =>
                  html`<tr key=${hook.event}>
                    <th scope="row"><code>${hook.event}</code></th>
                    <td>
                      ${
                        hook.trigger
                          ? html`on <code>${hook.trigger.table}</code> (${hook.trigger.operations.join(', ')}) to
                              <code>${hook.trigger.webhook ?? hook.trigger.webhookFromEnv}</code>; ${hook.trigger.pending} pending, ${hook.trigger.dead} dead`
                          : html`<span class="muted">no event trigger of this name</span>`
                      }
                    </td>
                    <td>
                      ${
                        hook.recent.length === 0
                          ? html`<span class="muted">none</span>`
                          : hook.recent.map(
                              (event) =>
                                html`<div key=${event.id}>
                                  ${new Date(event.createdAt).toLocaleString()} ${event.op} ${event.state} (${event.tries} tries)
                                </div>`,
                            )
                      }
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </section>`;
}
