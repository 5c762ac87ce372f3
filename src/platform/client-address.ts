import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { TRUSTED_PROXY_NAMES, type TrustProxy } from '../config';

/** Whether the peer at `address`, `hop` steps from us, is a proxy whose X-Forwarded-For we believe. */
export type TrustFunction = (address: string, hop: number) => boolean;

/** The ranges behind the names TRUST_PROXY accepts (the names proxy-addr and Express use). */
const NAMED_RANGES: Record<(typeof TRUSTED_PROXY_NAMES)[number], [string, number][]> = {
  loopback: [
    ['127.0.0.0', 8],
    ['::1', 128],
  ],
  linklocal: [
    ['169.254.0.0', 16],
    ['fe80::', 10],
  ],
  uniquelocal: [
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
    ['fc00::', 7],
  ],
};

function isNamedRange(entry: string): entry is keyof typeof NAMED_RANGES {
  return (TRUSTED_PROXY_NAMES as readonly string[]).includes(entry);
}

/** An address (prefix undefined) or a CIDR range, as TRUST_PROXY writes it. */
function range(entry: string): [string, number | undefined] {
  const [address, prefix] = entry.split('/');
  return [address, prefix === undefined ? undefined : Number(prefix)];
}

const family = (address: string) => (net.isIPv6(address) ? 'ipv6' : 'ipv4');

/**
 * The TRUST_PROXY setting (validated by the configuration) as one function, given to Fastify's
 * `trustProxy` and used for WebSocket upgrades, so both read X-Forwarded-For alike. A hop count
 * is a function of our own: Fastify 5 no longer accepts one, since it trusts whoever connects
 * (as `true` does); it is right only when nothing can reach the server but through the proxies.
 */
export function trustFunction(setting: TrustProxy): TrustFunction | false {
  if (setting === false || setting === 0 || (Array.isArray(setting) && setting.length === 0)) return false;
  if (setting === true) return () => true;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  const trusted = new net.BlockList();
  for (const entry of setting) {
    for (const [address, prefix] of isNamedRange(entry) ? NAMED_RANGES[entry] : [range(entry)]) {
      if (prefix === undefined) trusted.addAddress(address, family(address));
      else trusted.addSubnet(address, prefix, family(address));
    }
  }
  return (address) => net.isIP(address) !== 0 && trusted.check(address, family(address));
}

/**
 * The client's address, as Fastify's request.ip computes it: walking X-Forwarded-For from the
 * nearest entry while the peer that added it is trusted. For requests Fastify does not route
 * (the WebSocket upgrade).
 */
export function clientAddress(request: IncomingMessage, trust: TrustFunction | false): string {
  let address = request.socket.remoteAddress ?? '';
  const header = request.headers['x-forwarded-for'];
  if (!trust || header === undefined) return address;
  const forwarded = (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .reverse();
  for (let hop = 0; hop < forwarded.length && trust(address, hop); hop += 1) address = forwarded[hop];
  return address;
}
