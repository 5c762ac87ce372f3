import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/**
 * The parts of a `ws` (8.x) WebSocket that tell whether a frame may go straight to its TCP
 * socket. ws keeps them private; `directStream` falls back to WebSocket.send when they are not as
 * expected, so a ws that renamed them is only slower.
 */
interface WsInternals {
  _socket?: Duplex;
  _extensions?: Record<string, unknown>;
  _sender?: { _state: unknown; _queue: unknown[]; _firstFragment: unknown };
}

/** ws's Sender state when it is neither compressing nor reading a Blob (nothing of its own waits). */
const SENDER_IDLE = 0;
/** The only extension ws implements; it changes how frames are made. */
const PERMESSAGE_DEFLATE = 'permessage-deflate';
/** FIN bit and the text opcode: a whole text message in one frame. */
const FINAL_TEXT_FRAME = 0x81;

/**
 * Sends the concatenation of `parts` (UTF-8) as one text message. A server's frames are not
 * masked, so the frame is the header and the bytes as they are: built here in one buffer and
 * written to the TCP socket in one call (one write syscall), where WebSocket.send would frame the
 * header and the data as two buffers (a writev) after its own checks. It goes through
 * WebSocket.send when ws has something of its own to write first (a compression or a Blob under
 * way, a fragmented message) or compresses messages (permessage-deflate), which keeps the order
 * of the messages on the socket. Writes still queue behind the socket's unsent bytes, which
 * WebSocket.bufferedAmount counts.
 */
export function sendText(socket: WebSocket, parts: readonly Buffer[]): void {
  let length = 0;
  for (const part of parts) length += part.length;
  const stream = directStream(socket);
  if (!stream) return socket.send(Buffer.concat(parts, length), { binary: false });
  const headerLength = length < 126 ? 2 : length < 65536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(headerLength + length);
  frame[0] = FINAL_TEXT_FRAME;
  if (headerLength === 2) {
    frame[1] = length;
  } else if (headerLength === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  let offset = headerLength;
  for (const part of parts) offset += part.copy(frame, offset);
  stream.write(frame);
}

/** The open socket's TCP stream, when a frame written to it directly lands where ws's next frame would. */
function directStream(socket: WebSocket): Duplex | undefined {
  if (socket.readyState !== socket.OPEN) return undefined;
  const { _socket: stream, _sender: sender, _extensions: extensions } = socket as unknown as WsInternals;
  if (!stream || !sender || !extensions || extensions[PERMESSAGE_DEFLATE] !== undefined) return undefined;
  if (sender._state !== SENDER_IDLE || sender._queue.length > 0 || sender._firstFragment !== true) return undefined;
  return stream;
}

/**
 * The UTF-8 of `text` in a buffer of its own. Buffer.from puts short texts in slices of a shared
 * 8 KiB pool, and one slice kept keeps its whole slab: use this for bytes kept long.
 */
export function unpooledBytes(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  return bytes;
}
