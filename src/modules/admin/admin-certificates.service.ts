import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** A certificate expiring within this many days is warned about. */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 24 * 3600 * 1000;
const CERTIFICATE_FILE = /\.(pem|crt|cer)$/i;
const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export interface CertificateInfo {
  file: string;
  /** Its place in the file: 0 is the server's certificate, the others its chain. */
  index: number;
  subject: string;
  issuer: string;
  subjectAltNames: string[];
  serialNumber: string;
  fingerprintSha256: string;
  validFrom: string;
  validTo: string;
  daysLeft: number;
  selfSigned: boolean;
  state: 'valid' | 'expiring' | 'expired' | 'not-yet-valid';
  warning: string | null;
}

export interface CertificatesReport {
  tlsConfigured: boolean;
  message: string;
  warningDays: number;
  certificates: CertificateInfo[];
  /** Files named by PLATFORM_TLS_CERT_FILES that could not be read, each with why. */
  problems: { file: string; problem: string }[];
}

/** A DN as node prints it (one `key=value` a line) on one line. */
const oneLine = (name: string) => name.split('\n').filter(Boolean).join(', ');

function describe(file: string, index: number, certificate: X509Certificate, now: number): CertificateInfo {
  const validFrom = new Date(certificate.validFrom);
  const validTo = new Date(certificate.validTo);
  const daysLeft = Math.floor((validTo.getTime() - now) / DAY_MS);
  const state = validTo.getTime() <= now ? 'expired' : validFrom.getTime() > now ? 'not-yet-valid' : daysLeft < EXPIRY_WARNING_DAYS ? 'expiring' : 'valid';
  const warning =
    state === 'expired'
      ? `Expired on ${validTo.toISOString().slice(0, 10)}`
      : state === 'expiring'
        ? `Expires in ${daysLeft} day${daysLeft === 1 ? '' : 's'} (${validTo.toISOString().slice(0, 10)}): renew it`
        : state === 'not-yet-valid'
          ? `Not valid before ${validFrom.toISOString()}`
          : null;
  return {
    file,
    index,
    subject: oneLine(certificate.subject),
    issuer: oneLine(certificate.issuer),
    subjectAltNames: (certificate.subjectAltName ?? '')
      .split(/,\s*/)
      .map((name) => name.trim())
      .filter(Boolean),
    serialNumber: certificate.serialNumber,
    fingerprintSha256: certificate.fingerprint256,
    validFrom: validFrom.toISOString(),
    validTo: validTo.toISOString(),
    daysLeft,
    selfSigned: certificate.subject === certificate.issuer && certificate.checkIssued(certificate),
    state,
    warning,
  };
}

/**
 * The certificates the TLS terminator in front of Plinth serves (PLATFORM_TLS_CERT_FILES: PEM
 * files, or folders of them; Plinth itself listens in plain HTTP behind it), each with its
 * subject, issuer, names, validity and days left, warned EXPIRY_WARNING_DAYS ahead.
 */
export function certificatesReport(files: readonly string[] | undefined, now = Date.now()): CertificatesReport {
  if (!files) {
    return {
      tlsConfigured: false,
      message: 'TLS is not configured: Plinth serves plain HTTP; set PLATFORM_TLS_CERT_FILES to the certificates your TLS terminator serves',
      warningDays: EXPIRY_WARNING_DAYS,
      certificates: [],
      problems: [],
    };
  }
  const certificates: CertificateInfo[] = [];
  const problems: CertificatesReport['problems'] = [];
  const read = (file: string, inFolder = false) => {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      problems.push({ file, problem: `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` });
      return;
    }
    const blocks = text.match(PEM_BLOCK) ?? [];
    // A folder's key files hold no certificate: only a file named on its own must.
    if (blocks.length === 0 && !inFolder) problems.push({ file, problem: 'holds no PEM certificate' });
    blocks.forEach((block, index) => {
      try {
        certificates.push(describe(file, index, new X509Certificate(block), now));
      } catch (error) {
        problems.push({ file, problem: `certificate ${index + 1} cannot be parsed: ${(error as Error).message}` });
      }
    });
  };
  for (const file of files) {
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (stat?.isDirectory()) {
      const names = fs
        .readdirSync(file)
        .filter((name) => CERTIFICATE_FILE.test(name))
        .sort();
      const before = certificates.length;
      for (const name of names) read(path.join(file, name), true);
      if (certificates.length === before) problems.push({ file, problem: 'holds no .pem, .crt or .cer file with a certificate' });
    } else {
      read(file);
    }
  }
  const expiring = certificates.filter((certificate) => certificate.warning !== null).length;
  return {
    tlsConfigured: true,
    message:
      certificates.length === 0
        ? 'TLS is configured, but no certificate could be read'
        : expiring === 0
          ? `${certificates.length} certificate(s), none expiring within ${EXPIRY_WARNING_DAYS} days`
          : `${expiring} of ${certificates.length} certificate(s) expired or expiring within ${EXPIRY_WARNING_DAYS} days`,
    warningDays: EXPIRY_WARNING_DAYS,
    certificates,
    problems,
  };
}
