import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer, type PerMessageDeflateOptions } from 'ws';
import { sendText } from '../../src/graphql/ws-frames';

const servers: WebSocketServer[] = [];
const clients: WebSocket[] = [];

afterAll(async () => {
  for (const client of clients) client.terminate();
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
});

/** A ws server and a client connected to it (compressing when `deflate` is given): the server's end of the connection, and what the client receives. */
async function connection(deflate: false | PerMessageDeflateOptions = false) {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: deflate });
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  const accepted = new Promise<WebSocket>((resolve) => server.once('connection', resolve));
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, { perMessageDeflate: deflate !== false });
  clients.push(client);
  const received: { text: string; binary: boolean }[] = [];
  client.on('message', (data, binary) => received.push({ text: String(data), binary }));
  const closed = new Promise((resolve) => client.once('close', resolve));
  await new Promise((resolve) => client.once('open', resolve));
  const socket = await accepted;
  return {
    socket,
    /** Everything the client received, once the connection closed. */
    async all() {
      await closed;
      return received;
    },
    /** Resolves with the first `count` messages the client received (within 5 s). */
    async messages(count: number) {
      const deadline = Date.now() + 5000;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`the client received ${received.length} of ${count} messages`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return received.slice(0, count);
    },
  };
}

/** `length` bytes of UTF-8 text, with characters of two and three bytes among them. */
function textOf(length: number): string {
  return 'é€x'.repeat(Math.floor(length / 6)) + '.'.repeat(length % 6);
}

describe('sendText', () => {
  it('delivers text messages of every header size intact and in order, one write each, without WebSocket.send', async () => {
    const { socket, messages } = await connection();
    const send = jest.spyOn(socket, 'send');
    const stream = (socket as unknown as { _socket: { write: (chunk: Buffer) => boolean } })._socket;
    const write = jest.spyOn(stream, 'write');
    // 7-bit, 16-bit and 64-bit payload lengths, at their edges.
    const lengths = [0, 1, 125, 126, 127, 65_535, 65_536, 200_000];
    const texts = lengths.map(textOf);
    for (const text of texts) {
      const bytes = Buffer.from(text);
      const middle = Math.floor(bytes.length / 2);
      sendText(socket, [bytes.subarray(0, middle), bytes.subarray(middle)]);
    }
    const got = await messages(texts.length);
    expect(got.map((message) => Buffer.byteLength(message.text))).toEqual(lengths);
    expect(got).toEqual(texts.map((text) => ({ text, binary: false })));
    expect(send).not.toHaveBeenCalled();
    expect(write).toHaveBeenCalledTimes(texts.length);
  });

  it('keeps the order with messages WebSocket.send writes before and after it', async () => {
    const { socket, messages } = await connection();
    socket.send('first');
    sendText(socket, [Buffer.from('sec'), Buffer.from('ond')]);
    socket.send('third');
    expect((await messages(3)).map((message) => message.text)).toEqual(['first', 'second', 'third']);
  });

  it('goes through WebSocket.send on a compressing connection, after a message still being compressed', async () => {
    const { socket, messages } = await connection({ threshold: 0 });
    const send = jest.spyOn(socket, 'send');
    const large = textOf(100_000);
    // Compression is asynchronous: the next message must wait for it.
    socket.send(large);
    sendText(socket, [Buffer.from('after')]);
    expect((await messages(2)).map((message) => message.text)).toEqual([large, 'after']);
    expect(send).toHaveBeenCalledTimes(2);
  });

  it('sends nothing on a closing socket', async () => {
    const { socket, all } = await connection();
    socket.send('before');
    socket.close(1000, 'done');
    sendText(socket, [Buffer.from('late')]);
    expect((await all()).map((message) => message.text)).toEqual(['before']);
  });
});
