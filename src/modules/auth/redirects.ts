import { authError } from './auth-errors';

/**
 * Where `redirectTo` may point: AUTH_CLIENT_URL or an entry of AUTH_ALLOWED_REDIRECT_URLS. Scheme,
 * host and port must match exactly (`*` stands for exactly one host label), and the path must be
 * the entry's or below it. Parsed as URLs, never compared as strings, so `https://a.com.evil.io`,
 * `https://evil.io/?https://a.com` and `https://a.com@evil.io` match nothing.
 */
export class RedirectPolicy {
  private readonly entries: AllowedRedirect[];

  constructor(
    allowed: readonly string[],
    /** AUTH_CLIENT_URL: where a flow given no redirectTo sends the browser. */
    private readonly clientUrl: string,
  ) {
    this.entries = allowed.map(parseEntry);
  }

  /** A redirectTo, or AUTH_CLIENT_URL when none is given; 400 redirectTo-not-allowed when it may not be used. */
  target(requested: string | undefined): string {
    if (requested === undefined || requested === '') return this.clientUrl;
    if (!this.allows(requested)) throw authError('redirectTo-not-allowed');
    return requested;
  }

  allows(target: string): boolean {
    if (!URL.canParse(target)) return false;
    const url = new URL(target);
    // Credentials in a redirect serve only to disguise its host.
    if (url.username || url.password) return false;
    return this.entries.some((entry) => entry.matches(url));
  }
}

interface AllowedRedirect {
  matches(url: URL): boolean;
}

const WILDCARD = 'plinth-wildcard-label';

function parseEntry(entry: string): AllowedRedirect {
  const parsed = new URL(entry.replace(/\*/g, WILDCARD));
  const labels = parsed.hostname.split('.');
  const path = parsed.pathname.replace(/\/+$/, '');
  return {
    matches(url) {
      if (url.protocol !== parsed.protocol || url.port !== parsed.port) return false;
      const given = url.hostname.split('.');
      if (given.length !== labels.length) return false;
      // A wildcard is one DNS label: letters, digits and hyphens, never empty, never a dot.
      const hostMatches = labels.every((label, index) =>
        label === WILDCARD ? /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(given[index]) : label === given[index],
      );
      if (!hostMatches) return false;
      return path === '' || url.pathname === path || url.pathname.startsWith(`${path}/`);
    },
  };
}

/** `target` with `parameters` added to its query, keeping the query it had. */
export function withQuery(target: string, parameters: Record<string, string>): string {
  const url = new URL(target);
  for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value);
  return url.toString();
}
