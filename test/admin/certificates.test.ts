import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

let server: AdminTestServer;
let admin: AdminClient;
let folder: string;

/** A self-signed certificate made by openssl: `name.pem` and its key `name.key` in `dir`. */
function selfSigned(dir: string, name: string, days: number, subject: string, altNames: string): string {
  const file = path.join(dir, `${name}.pem`);
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', String(days)].concat([
      '-subj',
      subject,
      '-addext',
      `subjectAltName=${altNames}`,
      '-keyout',
      path.join(dir, `${name}.key`),
      '-out',
      file,
    ]),
    { stdio: 'ignore' },
  );
  return file;
}

interface Report {
  tlsConfigured: boolean;
  message: string;
  warningDays: number;
  certificates: Record<string, unknown>[];
  problems: { file: string; problem: string }[];
}

beforeAll(async () => {
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-certs-'));
  fs.mkdirSync(path.join(folder, 'live'));
  selfSigned(path.join(folder, 'live'), 'api', 90, '/CN=api.example.test/O=Plinth Tests', 'DNS:api.example.test,DNS:www.example.test,IP:127.0.0.1');
  // The key beside it in the folder is not a certificate, and is no problem.
  selfSigned(folder, 'soon', 5, '/CN=soon.example.test', 'DNS:soon.example.test');
  fs.writeFileSync(path.join(folder, 'broken.pem'), '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
  server = await startAdminServer({
    PLATFORM_TLS_CERT_FILES: `${path.join(folder, 'live')}, ${path.join(folder, 'soon.pem')},${path.join(folder, 'broken.pem')},${path.join(folder, 'missing.pem')}`,
  });
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
});
afterAll(async () => {
  await server?.close();
});

describe('GET /api/certificates with TLS configured', () => {
  it('answers 401 without a session', async () => {
    expect(await new AdminClient(server.adminUrl).request('GET', '/api/certificates')).toMatchObject({ status: 401, body: { error_code: 'UNAUTHENTICATED' } });
  });

  it("shows each certificate's subject, issuer, names, validity and days left, warning 14 days before it expires", async () => {
    const answer = await admin.request<Report>('GET', '/api/certificates');
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ tlsConfigured: true, warningDays: 14, message: '1 of 2 certificate(s) expired or expiring within 14 days' });
    const [api, soon] = answer.body.certificates;
    expect(api).toMatchObject({
      file: path.join(folder, 'live', 'api.pem'),
      index: 0,
      subject: 'CN=api.example.test, O=Plinth Tests',
      issuer: 'CN=api.example.test, O=Plinth Tests',
      subjectAltNames: ['DNS:api.example.test', 'DNS:www.example.test', 'IP Address:127.0.0.1'],
      selfSigned: true,
      state: 'valid',
      warning: null,
    });
    expect([89, 90]).toContain(api.daysLeft);
    expect(Date.parse(api.validTo as string) - Date.parse(api.validFrom as string)).toBe(90 * 24 * 3600 * 1000);
    expect(api.fingerprintSha256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(soon).toMatchObject({ subject: 'CN=soon.example.test', state: 'expiring', subjectAltNames: ['DNS:soon.example.test'] });
    expect([4, 5]).toContain(soon.daysLeft);
    expect(soon.warning).toMatch(/^Expires in [45] days \(\d{4}-\d{2}-\d{2}\): renew it$/);
    expect(answer.body.problems).toEqual([
      { file: path.join(folder, 'broken.pem'), problem: expect.stringContaining('certificate 1 cannot be parsed') },
      { file: path.join(folder, 'missing.pem'), problem: 'cannot be read (ENOENT)' },
    ]);
    // A renewed certificate shows without a restart (the files are read on each request).
    selfSigned(folder, 'soon', 60, '/CN=soon.example.test', 'DNS:soon.example.test');
    const renewed = await admin.request<Report>('GET', '/api/certificates');
    expect(renewed.body.certificates[1]).toMatchObject({ state: 'valid', warning: null });
  });
});
