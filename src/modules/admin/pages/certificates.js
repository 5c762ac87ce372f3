// Certificates: those the TLS terminator serves, with their expiry, warned 14 days ahead.
import { useEffect, useState } from './hooks.js';
import { api, html } from './ui.js';

const STATE_CLASS = { valid: 'state-ok', expiring: 'state-stopped', expired: 'state-unavailable', 'not-yet-valid': 'state-stopped' };

export function Certificates() {
  const [report, setReport] = useState(undefined);
  useEffect(() => {
    api('GET', '/certificates').then((answer) => {
      if (answer.status === 401) return location.reload();
      setReport(answer.status === 200 ? answer.body : { tlsConfigured: false, message: answer.body.message, certificates: [], problems: [] });
    });
  }, []);
  if (report === undefined) return html`<p class="loading">Loading…</p>`;
  return html`<section aria-labelledby="page-title">
    <h1 id="page-title">Certificates</h1>
    <p role="status">${report.message}</p>
    ${report.certificates
      .filter((certificate) => certificate.warning)
      .map((certificate) => html`<p class="error" role="alert">${certificate.subject}: ${certificate.warning}</p>`)}
    ${
      report.certificates.length === 0
        ? ''
        : html`<table>
            <caption class="visually-hidden">
              Certificates
            </caption>
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">Issuer</th>
                <th scope="col">Names</th>
                <th scope="col">Valid</th>
                <th scope="col">Days left</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              ${report.certificates.map(
                (certificate) =>
                  html`<tr key=${`${certificate.file}#${certificate.index}`}>
                    <th scope="row">${certificate.subject}<br /><code class="muted">${certificate.file}</code></th>
                    <td>${certificate.selfSigned ? 'self-signed' : certificate.issuer}</td>
                    <td>${certificate.subjectAltNames.join(', ')}</td>
                    <td>${certificate.validFrom.slice(0, 10)} to ${certificate.validTo.slice(0, 10)}</td>
                    <td>${certificate.daysLeft}</td>
                    <td><span class=${`state ${STATE_CLASS[certificate.state]}`}>${certificate.state}</span></td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    ${
      report.problems.length === 0
        ? ''
        : html`<h2>Unreadable</h2>
            <ul>
              ${report.problems.map((problem) => html`<li><code>${problem.file}</code>: ${problem.problem}</li>`)}
            </ul>`
    }
  </section>`;
}
