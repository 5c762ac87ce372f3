import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** How long the rest of a refused body may keep arriving (read and dropped) after the answer. */
export const UNREAD_BODY_LINGER_MS = 5_000;

/**
 * A lingering close (RFC 9112 §9.6) for a connection Fastify closes because it refused a body
 * before reading all of it (a body limit, a body parser's error: `connection: close`). Node closes
 * such a socket as soon as the answer is written; the rest of the body, still arriving, then meets
 * a reset, which can reach the caller before the answer does (its write fails with EPIPE and it
 * never sees the 413). Here the answer goes out, the sending side closes, and the rest of the body
 * is read and dropped until the caller closes its side or UNREAD_BODY_LINGER_MS have passed.
 * Called from the error handler, before the answer is written; a no-op once the body was read.
 */
export function lingerOnUnreadBody(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw;
  if (raw.complete || reply.getHeader('connection') !== 'close') return;
  const socket = raw.socket as Socket;
  // What Node's server calls once the answer of a connection's last request is written.
  socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
    // Drop the body's rest (no one reads it; unread, it would stop the socket's reading).
    raw.resume();
    const timer = setTimeout(() => this.destroy(), UNREAD_BODY_LINGER_MS).unref();
    this.once('close', () => clearTimeout(timer));
  };
}
