import type { Config } from '../config';

/** Query parameters of a link; undefined ones are left out. */
export type LinkQuery = Record<string, string | number | boolean | undefined>;

/**
 * An absolute link to `path` under PLINTH_PUBLIC_URL, its query encoded. Every link Plinth sends
 * or signs is built by this function or authUrl, so links follow the configured addresses (not
 * the Host header of some request) and encode their parameters one way.
 */
export function publicUrl(config: Pick<Config, 'publicUrl'>, path: string, query?: LinkQuery): string {
  return linkUnder(config.publicUrl, path, query);
}

/** The same under AUTH_SERVER_URL, the spec's `{auth_url}`: `authUrl(config, '/verify', {ticket})`. */
export function authUrl(config: Pick<Config, 'auth'>, path: string, query?: LinkQuery): string {
  return linkUnder(config.auth.serverUrl, path, query);
}

function linkUnder(base: string, path: string, query: LinkQuery = {}): string {
  // The query goes in `query`, encoded; a path carrying its own would escape that.
  if (!/^\/[^?#]*$/.test(path)) throw new Error(`a link path starts with "/" and has no query or fragment (got "${path}")`);
  const url = new URL(base + path);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined) url.searchParams.append(name, String(value));
  }
  return url.toString();
}
