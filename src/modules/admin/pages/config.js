// Configuration: every setting with its running and saved value; a change is validated and saved to the settings file.
import { useCallback, useEffect, useRef, useState } from './hooks.js';
import { api, html } from './ui.js';

export function Configuration() {
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
