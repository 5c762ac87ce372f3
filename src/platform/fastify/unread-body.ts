import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** How long the rest of a refused body may keep arriving (read and dropped) after the answer. */
export const UNREAD_BODY_LINGER_MS = 5_000;

/**
 * Settles a body the answer goes out before: an error raised before the body was read to its end
 * (a body limit, no parser for its media type, a parser's refusal). Called from the error
 * handler, before the answer is written; a no-op once the body was read.
 *
 * - When Fastify closes the connection (`connection: close`): a lingering close (RFC 9112 §9.6).
 *   Node closes such a socket as soon as the answer is written; the rest of the body, still
 *   arriving, then meets a reset, which can reach the caller before the answer does (its write
 *   fails with EPIPE and it never sees the 413). Here the answer goes out, the sending side closes,
 *   and the rest of the body is read and dropped until the caller closes its side or
 *   UNREAD_BODY_LINGER_MS have passed.
 * - When the connection is kept alive: the rest of the body is read and dropped once the answer is
 *   written, and the caller's next request on the connection follows it. Node does this itself for
 *   a body nobody began to read, but not for one a hook began to read (a stream piped between the
 *   request and the parser, as keepRawBodies does): that one stayed paused, and the connection
 *   hung with the caller's next request behind it. HTTP_REQUEST_TIMEOUT_SECONDS bounds it, as any
 *   body.
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
