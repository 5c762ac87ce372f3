// Database: backups (take one, restore one after confirming), migrations (run the pending ones), and the schema browser.
import { useCallback, useEffect, useRef, useState } from './hooks.js';
import { api, html } from './ui.js';

function bytes(count) {
  if (count < 1024) return `${count} B`;
  if (count < 1024 * 1024) return `${(count / 1024).toFixed(1)} KiB`;
  return `${(count / 1024 / 1024).toFixed(1)} MiB`;
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

/** The confirm step of a restore: names the backup, says what happens, focuses its cancel button. */
function ConfirmRestore({ backup, busy, onConfirm, onCancel }) {
  const cancel = useRef(null);
  useEffect(() => cancel.current?.focus(), [backup.file]);
  return html`<div
    class="edit confirm"
    role="alertdialog"
    aria-labelledby="confirm-title"
    aria-describedby="confirm-text"
    onKeyDown=${(event) => event.key === 'Escape' && onCancel()}
  >
    <h2 id="confirm-title">Restore ${backup.file}?</h2>
    <p id="confirm-text">
      The database goes back to ${when(backup.createdAt)}: what changed since is replaced. A safety backup of the database as it is now is taken first. The
      dashboard's sessions are kept; restart Plinth's processes afterwards.
    </p>
    <button type="button" class="danger" disabled=${busy} onClick=${onConfirm}>Restore now</button>
    <button type="button" ref=${cancel} disabled=${busy} onClick=${onCancel}>Cancel</button>
  </div>`;
}

function Backups() {
  const [backups, setBackups] = useState([]);
  const [message, setMessage] = useState({ text: '', ok: true });
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(null);
  /** The button that opened the confirm step: the focus goes back to it when the step closes. */
  const opener = useRef(null);
  const ask = (backup, event) => {
    opener.current = event.currentTarget;
    setConfirming(backup);
  };
  const closeConfirm = () => {
    setConfirming(null);
    setTimeout(() => opener.current?.focus(), 0);
  };

  const load = useCallback(async () => {
    const answer = await api('GET', '/database/backups');
    if (answer.status === 401) return location.reload();
    if (answer.status === 200) setBackups(answer.body.backups);
    else setMessage({ text: answer.body.message || `Backups are unavailable (${answer.status})`, ok: false });
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const take = async () => {
    setBusy(true);
    setMessage({ text: 'Taking a backup…', ok: true });
    const answer = await api('POST', '/database/backups');
    // The list first: when the message says the backup is taken, its row is there.
    await load();
    setBusy(false);
    setMessage(
      answer.status === 201
        ? { text: `Backup ${answer.body.file} taken (${bytes(answer.body.sizeBytes)}).`, ok: true }
        : { text: answer.body.message || `The backup failed (${answer.status})`, ok: false },
    );
  };

  const restore = async () => {
    const backup = confirming;
    setBusy(true);
    setMessage({ text: `Restoring ${backup.file}…`, ok: true });
    const answer = await api('POST', '/database/backups/restore', { file: backup.file, ...(backup.sha256 ? { sha256: backup.sha256 } : {}) });
    setBusy(false);
    closeConfirm();
    setMessage(
      answer.status === 200
        ? {
            text: `Restored ${backup.file} in ${(answer.body.durationMs / 1000).toFixed(1)} s; safety backup ${answer.body.safetyBackup.file}. Restart Plinth's processes to reload what they keep in memory.`,
            ok: true,
          }
        : { text: answer.body.message || `The restore failed (${answer.status})`, ok: false },
    );
    await load();
  };

  return html`<section aria-labelledby="backups-title">
    <h2 id="backups-title">Backups</h2>
    <div class="controls">
      <button type="button" onClick=${take} disabled=${busy}>Take a backup</button>
      <span class="muted">pg_dump's custom format, each with its SHA-256 checked before a restore</span>
    </div>
    <p role="status" class=${message.ok ? 'status' : 'status error'}>${message.text}</p>
    ${confirming && html`<${ConfirmRestore} backup=${confirming} busy=${busy} onConfirm=${restore} onCancel=${closeConfirm} />`}
    ${
      backups.length === 0
        ? html`<p class="muted">No backups yet.</p>`
        : html`<table class="backups">
            <caption class="visually-hidden">
              Backups, newest first
            </caption>
            <thead>
              <tr>
                <th scope="col">File</th>
                <th scope="col">Taken</th>
                <th scope="col">Size</th>
                <th scope="col">SHA-256</th>
                <th scope="col">Restore</th>
              </tr>
            </thead>
            <tbody>
              ${backups.map(
                (backup) =>
                  html`<tr key=${backup.file} data-backup=${backup.file}>
                    <th scope="row"><code>${backup.file}</code> ${backup.safety ? html`<span class="state state-stopped">safety</span>` : ''}</th>
                    <td>${when(backup.createdAt)}</td>
                    <td>${bytes(backup.sizeBytes)}</td>
                    <td><code title=${backup.sha256 ?? ''}>${backup.sha256 ? `${backup.sha256.slice(0, 12)}…` : 'not recorded'}</code></td>
                    <td>
                      <button type="button" aria-label=${`Restore ${backup.file}`} disabled=${busy || !backup.sha256} onClick=${(event) => ask(backup, event)}>
                        Restore…
                      </button>
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </section>`;
}

function Migrations() {
  /** null until the first answer: no count is shown before it ("0 of 0 applied" would be wrong). */
  const [migrations, setMigrations] = useState(null);
  const [message, setMessage] = useState({ text: '', ok: true });
  const [busy, setBusy] = useState(false);
  /** The list opens by itself when something is pending, and then stays as the person leaves it. */
  const [expanded, setExpanded] = useState(false);

  const load = useCallback(async () => {
    const answer = await api('GET', '/database/migrations');
    if (answer.status === 200) {
      setMigrations(answer.body.migrations);
      if (answer.body.migrations.some((migration) => migration.status === 'pending')) setExpanded(true);
    } else setMessage({ text: answer.body.message || `Migrations are unavailable (${answer.status})`, ok: false });
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const pending = (migrations ?? []).filter((migration) => migration.status === 'pending');
  const run = async () => {
    setBusy(true);
    const answer = await api('POST', '/database/migrations/run');
    setBusy(false);
    if (answer.status === 200) {
      setMigrations(answer.body.migrations);
      setMessage({ text: answer.body.ran.length ? `Ran ${answer.body.ran.join(', ')}.` : 'Nothing was pending.', ok: true });
    } else {
      setMessage({ text: answer.body.message || `Running the migrations failed (${answer.status})`, ok: false });
    }
  };

  return html`<section aria-labelledby="migrations-title">
    <h2 id="migrations-title">Migrations</h2>
    <div class="controls">
      <button type="button" onClick=${run} disabled=${busy || pending.length === 0}>Run pending (${pending.length})</button>
      <span class="muted">${migrations ? `${migrations.length - pending.length} of ${migrations.length} applied` : 'Loading…'}</span>
    </div>
    <p role="status" class=${message.ok ? 'status' : 'status error'}>${message.text}</p>
    <details open=${expanded} onToggle=${(event) => setExpanded(event.currentTarget.open)}>
      <summary>Every migration</summary>
      <table>
        <caption class="visually-hidden">
          Migrations, oldest first
        </caption>
        <thead>
          <tr>
            <th scope="col">Migration</th>
            <th scope="col">Status</th>
            <th scope="col">Applied at</th>
          </tr>
        </thead>
        <tbody>
          ${(migrations ?? []).map(
            (migration) =>
              html`<tr key=${migration.name} data-migration=${migration.name}>
                <th scope="row"><code>${migration.name}</code></th>
                <td>
                  <span class=${`state ${migration.status === 'applied' ? 'state-ok' : 'state-stopped'}`}>${migration.status}</span>
                  ${migration.unknownToThisVersion ? html` <span class="muted">not of this version</span>` : ''}
                </td>
                <td>${migration.appliedAt ? when(migration.appliedAt) : html`<span class="muted">not recorded</span>`}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </details>
  </section>`;
}

function TableDetail({ table }) {
  return html`<div class="table-detail">
    <h3>
      <code>${table.schema}.${table.name}</code>
      ${table.tracked ? html` <span class="state state-ok">tracked</span>` : ''}
    </h3>
    <p class="muted">
      ${table.kind}; ${table.rowEstimate === null ? 'no row estimate yet' : `about ${table.rowEstimate} rows`}; ${bytes(table.totalBytes)}
      ${table.primaryKey.length ? `; primary key (${table.primaryKey.join(', ')})` : ''}
    </p>
    <table>
      <caption>
        Columns
      </caption>
      <thead>
        <tr>
          <th scope="col">Column</th>
          <th scope="col">Type</th>
          <th scope="col">Nullable</th>
          <th scope="col">Default</th>
        </tr>
      </thead>
      <tbody>
        ${table.columns.map(
          (column) =>
            html`<tr key=${column.name}>
              <th scope="row"><code>${column.name}</code></th>
              <td><code>${column.type}</code></td>
              <td>${column.nullable ? 'yes' : 'no'}</td>
              <td><code>${column.default ?? ''}</code></td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${
      table.indexes.length > 0 &&
      html`<h4>Indexes</h4>
        <ul class="indexes">
          ${table.indexes.map((index) => html`<li key=${index.name}><code>${index.definition}</code></li>`)}
        </ul>`
    }
  </div>`;
}

function Schema() {
  const [tables, setTables] = useState([]);
  const [filter, setFilter] = useState('');
  const [selected, setSelected] = useState('');
  const [message, setMessage] = useState('');

  useEffect(() => {
    api('GET', '/database/schema').then((answer) => {
      if (answer.status === 200) setTables(answer.body.tables);
      else setMessage(answer.body.message || `The schema is unavailable (${answer.status})`);
    });
  }, []);

  const key = (table) => `${table.schema}.${table.name}`;
  const shown = tables.filter((table) => key(table).toLowerCase().includes(filter.trim().toLowerCase()));
  const current = tables.find((table) => key(table) === selected);
  const schemas = [...new Set(shown.map((table) => table.schema))];

  return html`<section aria-labelledby="schema-title">
    <h2 id="schema-title">Schema</h2>
    <p class="error">${message}</p>
    <div class="controls">
      <label for="schema-filter">Find a table</label>
      <input id="schema-filter" type="search" value=${filter} onInput=${(event) => setFilter(event.target.value)} />
      <span class="muted">${shown.length} of ${tables.length}; ${tables.filter((table) => table.tracked).length} tracked by the GraphQL API</span>
    </div>
    <div class="schema">
      <nav aria-label="Tables" class="schema-tables">
        ${schemas.map(
          (schema) =>
            html`<h3 key=${schema}>${schema}</h3>
              <ul>
                ${shown
                  .filter((table) => table.schema === schema)
                  .map(
                    (table) =>
                      html`<li key=${key(table)}>
                        <button type="button" class="link" aria-pressed=${selected === key(table)} onClick=${() => setSelected(key(table))}>
                          ${table.name}
                        </button>
                        ${table.tracked ? html` <span class="state state-ok">tracked</span>` : ''}
                      </li>`,
                  )}
              </ul>`,
        )}
      </nav>
      <div aria-live="polite">
        ${current ? html`<${TableDetail} table=${current} />` : html`<p class="muted">Choose a table to see its columns and indexes.</p>`}
      </div>
    </div>
  </section>`;
}

export function Database() {
  return html`<section aria-labelledby="page-title" class="database">
    <h1 id="page-title">Database</h1>
    <${Backups} />
    <${Migrations} />
    <${Schema} />
  </section>`;
}
