/**
 * The child's output: collected as it arrives (so a stop keeps what was written before it), and
 * drained with a bound after a stop.
 *
 * Why a bound: with piped stdio, the read end stays open while any process holds the write end,
 * and a grandchild that escaped every sweep (a double-forked daemon) may hold it forever. execa's
 * own promise hangs in exactly that case (measured, issue #4), so the output is not read through
 * it; after a stop the streams get `DRAIN_BOUND_MS` to close, then are destroyed.
 */

import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

/** How long the pipes may stay open once a stop has ended the tree. */
export const DRAIN_BOUND_MS = 200;

/** One stream's text, capped at `maxBuffer` characters. */
export class Output {
  text = '';
  /** True once more than `maxBuffer` characters arrived (the rest is read and dropped). */
  overflowed = false;
  /** Resolves (never rejects) when the stream has closed. */
  readonly closed: Promise<void>;
  readonly #stream: Readable;
  readonly #decoder = new StringDecoder('utf8');

  constructor(stream: Readable, maxBuffer: number, onOverflow: () => void) {
    this.#stream = stream;
    stream.on('data', (chunk: Buffer) => {
      if (this.overflowed) return;
      this.text += this.#decoder.write(chunk);
      if (this.text.length <= maxBuffer) return;
      this.text = this.text.slice(0, maxBuffer);
      this.overflowed = true;
      onOverflow();
    });
    this.closed = new Promise((resolve) => {
      stream.once('close', () => {
        if (!this.overflowed) this.text += this.#decoder.end();
        resolve();
      });
      // An 'error' is always followed by 'close'; the listener only keeps it from being thrown.
      stream.on('error', () => {});
    });
  }

  destroy(): void {
    this.#stream.destroy();
  }
}

/** Both streams closed, however long it takes (no stop: the output is what the caller waits for). */
export function allClosed(outputs: readonly Output[]): Promise<void> {
  return Promise.all(outputs.map((o) => o.closed)).then(() => undefined);
}

/** Wait up to `boundMs` for the streams to close, then destroy the ones still open. */
export async function drain(outputs: readonly Output[], boundMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => { timer = setTimeout(resolve, boundMs); });
  await Promise.race([allClosed(outputs), bound]);
  clearTimeout(timer);
  for (const output of outputs) output.destroy();
  await allClosed(outputs);
}
