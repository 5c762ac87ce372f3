import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { FuzzTarget } from './fuzzer';
import type { FuzzerMessage, ServerProcessMessage } from './server-process';

/**
 * Starts the real server in a child process (test/fuzz/server-process.ts) on a database of its
 * own, and describes it to the fuzzer: its URL, its route table, its error-level log lines as
 * they arrive, and its resident memory.
 */
export function startFuzzTarget(): Promise<{ target: FuzzTarget; stop(): Promise<void> }> {
  const child = fork(path.join(__dirname, 'server-process.js'), [], { env: process.env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const errorLines: string[] = [];
  const command = (message: FuzzerMessage) => child.send(message);
  let snapshotWritten: ((path: string) => void) | undefined;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.on('message', (message: ServerProcessMessage) => {
      if (message.type === 'log') errorLines.push(message.line);
      else if (message.type === 'heap-snapshot-written') snapshotWritten?.(message.path);
      else if (message.type === 'failed') reject(new Error(`the server did not start: ${message.error}`));
      else
        resolve({
          target: {
            url: message.url,
            routes: message.routes,
            errorLines: () => errorLines,
            residentBytes: () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) * 1024,
            writeHeapSnapshot: (file) =>
              new Promise((written) => {
                snapshotWritten = written;
                command({ type: 'heap-snapshot', path: file });
              }),
          },
          stop: async () => {
            command({ type: 'stop' });
            await exited;
          },
        });
    });
    child.once('exit', (code) => reject(new Error(`the server process exited with ${code} before it was ready`)));
  });
}
