import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** How long the rest of a refused body may keep arriving (read and dropped) after the answer. */
export const UNREAD_BODY_LINGER_MS = 5_000;

/**
 * Settles a body the answer goes out before (a body limit, no parser for its media type, a
 * parser's refusal); called from the error handler before the answer is written. A connection
 * Fastify closes gets a lingering close (RFC 9112 §9.6): Node would destroy the socket once the
 * answer is written, and the rest of the body would meet a reset that can reach the caller before
 * the answer (EPIPE, no 413). On a kept-alive connection the rest is read and dropped after the
 * answer, which Node does only for a body nobody began to read: one a hook piped on (keepRawBodies)
 * would stay paused, with the caller's next request behind it. HTTP_REQUEST_TIMEOUT_SECONDS bounds it.
 */
export function dropUnreadBody(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw;
  if (raw.complete) return;
  // Whatever a hook piped the body into is not read any more; without it the body flows and is dropped.
  const drain = () => {
    raw.unpipe();
    raw.resume();
  };
  if (reply.getHeader('connection') !== 'close') {
    reply.raw.once('finish', drain);
    return;
  }
  const socket = raw.socket as Socket;
  // What Node's server calls once the answer of a connection's last request is written.
  socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
    drain();
    const timer = setTimeout(() => this.destroy(), UNREAD_BODY_LINGER_MS).unref();
    this.once('close', () => clearTimeout(timer));
  };
}
