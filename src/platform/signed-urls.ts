import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config';
import { publicUrl } from './urls';

/** The query parameters of a signed link. */
export interface SignedQuery {
  expires?: string;
  signature?: string;
}

export type SignatureProblem = 'missing' | 'expired' | 'invalid';

/**
 * Links to Plinth's own paths that work without a session until they expire, as S3's presigned
 * URLs do: `?expires=<unix seconds>&signature=<HMAC-SHA256 of the path and expiry, base64url>`.
 * The key is STORAGE_URL_SIGNING_SECRET, which every instance shares, so any instance verifies
 * what another signed. Outside production it may be unset: the key is then derived from the admin
 * secret (an HMAC under a label of its own). Not in production, where every link handed out would
 * let its holder test guesses at the admin secret offline.
 */
export class UrlSigner {
  private keyBytes: Buffer | undefined;

  constructor(private readonly config: Pick<Config, 'env' | 'publicUrl' | 'storage' | 'graphql'>) {}

  /** Made on first use: `plinth build` creates the services without secrets and never signs. */
  private get key(): Buffer {
    if (!this.keyBytes) {
      const secret = this.config.storage.signingSecret;
      const adminSecret = this.config.graphql.adminSecret;
      if (secret) this.keyBytes = Buffer.from(secret, 'utf8');
      else if (adminSecret && this.config.env !== 'production') {
        this.keyBytes = createHmac('sha256', adminSecret).update('plinth signed links v1').digest();
      } else throw new Error('signed links need STORAGE_URL_SIGNING_SECRET (or, outside production, GQL_GRAPHQL_ADMIN_SECRET)');
    }
    return this.keyBytes;
  }

  /** An absolute link to `path` under PLINTH_PUBLIC_URL that works for `ttlSeconds`. */
  sign(path: string, ttlSeconds: number, now = Date.now()): { url: string; expiresAt: Date } {
    const expires = Math.floor(now / 1000) + ttlSeconds;
    return {
      url: publicUrl(this.config, path, { expires, signature: this.signature(path, expires) }),
      expiresAt: new Date(expires * 1000),
    };
  }

  /** Why the link to `path` with this query does not work, or undefined when it does. */
  problem(path: string, query: SignedQuery, now = Date.now()): SignatureProblem | undefined {
    if (query.expires === undefined && query.signature === undefined) return 'missing';
    if (!query.expires || !/^\d{1,12}$/.test(query.expires) || !query.signature) return 'invalid';
    const given = Buffer.from(query.signature, 'base64url');
    const expected = Buffer.from(this.signature(path, Number(query.expires)), 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'invalid';
    return Number(query.expires) * 1000 <= now ? 'expired' : undefined;
  }

  private signature(path: string, expires: number): string {
    return createHmac('sha256', this.key).update(`${path}\n${expires}`).digest('base64url');
  }
}
