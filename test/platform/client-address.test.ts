import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { loadConfig } from '../../src/config';
import { clientAddress, trustFunction } from '../../src/platform/client-address';

const trustOf = (setting: string | undefined) => trustFunction(loadConfig(setting === undefined ? {} : { TRUST_PROXY: setting }).trustProxy);

/** Fastify as buildHttpApp configures it, answering with request.ip. */
async function echoIp(setting: string | undefined): Promise<{ app: FastifyInstance; ipFor(forwardedFor?: string): Promise<string> }> {
  const app = Fastify({ logger: false, trustProxy: trustOf(setting) });
  app.get('/ip', async (request) => request.ip);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/ip`;
  return {
    app,
    ipFor: async (forwardedFor) => (await fetch(url, { headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {} })).text(),
  };
}

describe('TRUST_PROXY over HTTP (request.ip)', () => {
  it.each([
    // setting, X-Forwarded-For, client address
    [undefined, '203.0.113.9', '127.0.0.1'],
    ['false', '203.0.113.9', '127.0.0.1'],
    ['true', '198.51.100.1, 203.0.113.9', '198.51.100.1'],
    ['127.0.0.1', '203.0.113.9', '203.0.113.9'],
    ['loopback', '198.51.100.1, 203.0.113.9', '203.0.113.9'],
    ['127.0.0.1, 203.0.113.0/24', '198.51.100.1, 203.0.113.9', '198.51.100.1'],
    ['10.0.0.0/8', '203.0.113.9', '127.0.0.1'],
    ['1', '198.51.100.1, 203.0.113.9', '203.0.113.9'],
    ['2', '198.51.100.1, 203.0.113.9', '198.51.100.1'],
    ['true', undefined, '127.0.0.1'],
  ])('TRUST_PROXY=%s with X-Forwarded-For %s gives %s', async (setting, forwardedFor, expected) => {
    const { app, ipFor } = await echoIp(setting);
    try {
      expect(await ipFor(forwardedFor)).toBe(expected);
    } finally {
      await app.close();
    }
  });
});

describe('clientAddress (the WebSocket upgrade)', () => {
  const upgrade = (peer: string, forwardedFor?: string) =>
    ({ socket: { remoteAddress: peer }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } }) as unknown as IncomingMessage;

  it.each([
    [undefined, '127.0.0.1', '203.0.113.9', '127.0.0.1'],
    ['127.0.0.1', '127.0.0.1', '203.0.113.9', '203.0.113.9'],
    ['127.0.0.1', '192.0.2.50', '203.0.113.9', '192.0.2.50'],
    ['loopback', '::ffff:127.0.0.1', '203.0.113.9', '203.0.113.9'],
    ['uniquelocal', '10.1.2.3', '198.51.100.1, 172.16.0.4', '198.51.100.1'],
    ['1', '192.0.2.50', '198.51.100.1, 203.0.113.9', '203.0.113.9'],
    ['127.0.0.1', '127.0.0.1', 'not-an-address, 203.0.113.9', '203.0.113.9'],
  ])('TRUST_PROXY=%s, peer %s, X-Forwarded-For %s: %s', (setting, peer, forwardedFor, expected) => {
    expect(clientAddress(upgrade(peer, forwardedFor), trustOf(setting))).toBe(expected);
  });
});
