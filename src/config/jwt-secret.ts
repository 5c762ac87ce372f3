import { createPublicKey } from 'node:crypto';
import { z } from 'zod';

const SYMMETRIC = ['HS256', 'HS384', 'HS512'] as const;
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512'] as const;

export type JwtAlgorithm = (typeof SYMMETRIC)[number] | (typeof ASYMMETRIC)[number];

/** The claim namespace when GQL_GRAPHQL_JWT_SECRET names none (see docs/decisions.md). */
const DEFAULT_CLAIMS_NAMESPACE = 'https://plinth.dev/jwt/claims';

const jwtSecretObject = z
  .object({
    type: z.enum([...SYMMETRIC, ...ASYMMETRIC], { error: 'type must be one of HS256, HS384, HS512, RS*, ES*, PS*' }),
    key: z.string({ error: 'key is required' }).min(1, { error: 'key is required' }),
    claims_namespace: z.string().min(1).default(DEFAULT_CLAIMS_NAMESPACE),
    claims_format: z.enum(['json', 'stringified_json']).default('json'),
    audience: z.union([z.string(), z.array(z.string()).nonempty()]).optional(),
    issuer: z.string().optional(),
    allowed_skew: z.number().int().min(0).max(3600).default(0),
  })
  .strict()
  .superRefine((value, ctx) => {
    // A 256-bit secret at least, as the auth service signs with (spec 2 §2.2).
    if ((SYMMETRIC as readonly string[]).includes(value.type) && Buffer.byteLength(value.key) < 32) {
      ctx.addIssue({ code: 'custom', path: ['key'], message: 'key must be at least 32 bytes for HMAC algorithms' });
    }
    if ((ASYMMETRIC as readonly string[]).includes(value.type)) {
      try {
        createPublicKey(value.key);
      } catch {
        ctx.addIssue({ code: 'custom', path: ['key'], message: `key must be a PEM public key for ${value.type}` });
      }
    }
  });

export type JwtSecretConfig = z.infer<typeof jwtSecretObject>;

/** GQL_GRAPHQL_JWT_SECRET: a JSON object such as {"type":"HS256","key":"...","claims_namespace":"..."}. */
export const jwtSecretSchema = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object such as {"type":"HS256","key":"<32+ byte secret>"}' });
      return z.NEVER;
    }
  })
  .pipe(jwtSecretObject);
