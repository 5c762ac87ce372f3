import { ADMIN_SECRET } from './server';

/** Sends a metadata request (`POST /v1/metadata`) with the admin secret; answers the status and the parsed body. */
export async function metadataRequest(baseUrl: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}
