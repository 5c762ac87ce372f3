import { ADMIN_SECRET } from '../support/server';

/** Sends a metadata request; answers the status and the parsed body. */
export async function metadataRequest(baseUrl: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 15_000, what = 'the condition'): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await sleep(50);
  }
}
