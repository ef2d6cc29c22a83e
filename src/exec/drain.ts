/**
 * The child's output: collected as it arrives (so a stop keeps what was written before it), and
 * drained with a bound after a stop.
 *
 * Why a bound: with piped stdio, the read end stays open while any process holds the write end,
 * and a grandchild that escaped every sweep (a double-forked daemon) may hold it forever. A
 * promise of the whole output (execa's, say) hangs in exactly that case; after a stop the streams get `DRAIN_BOUND_MS` to close, then are destroyed.
 */

import { constants } from 'node:buffer';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ToolError } from '../errors.js';
import type { Checked } from './options.js';

/** How long the pipes may stay open once a stop has ended the tree. */
export const DRAIN_BOUND_MS = 200;

/**
 * The longest string V8 can make. A `maxBuffer` above it cannot be honoured: the output is capped
 * here instead, since one more append would throw `RangeError: Invalid string length` from inside
 * a stream callback, where nothing can catch it, and kill the host.
 */
const MAX_OUTPUT_CHARS = constants.MAX_STRING_LENGTH;

/** One stream's text, capped at `maxBuffer` characters (and at `MAX_OUTPUT_CHARS`). */
export class Output {
  text = '';
  /** True once more than the cap arrived (the rest is read and dropped). */
  overflowed = false;
  /** The cap in characters: `maxBuffer`, or `MAX_OUTPUT_CHARS` when that is lower. */
  readonly cap: number;
  /** Resolves (never rejects) when the stream has closed. */
  readonly closed: Promise<void>;
  readonly #stream: Readable;
  readonly #decoder = new StringDecoder('utf8');

  constructor(stream: Readable, maxBuffer: number, onOverflow: () => void) {
    this.#stream = stream;
    this.cap = Math.min(maxBuffer, MAX_OUTPUT_CHARS);
    stream.on('data', (chunk: Buffer) => {
      if (this.overflowed) return;
      const part = this.#decoder.write(chunk);
      const room = this.cap - this.text.length;
      // Only the new part is ever cut: slicing the whole text would copy (flatten) all of it.
      if (part.length <= room) {
        this.text += part;
        return;
      }
      this.text += part.slice(0, room);
      this.overflowed = true;
      onOverflow();
    });
    this.closed = new Promise((resolve) => {
      stream.once('close', () => {
        if (!this.overflowed) this.text += this.#decoder.end().slice(0, this.cap - this.text.length);
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

/** An output overflow, as a `ToolError` naming the limit it hit and carrying the output read so far. */
export interface OutputError extends ToolError {
  /** Stdout read before the stop, up to the limit. */
  readonly stdout: string;
  /** Stderr read before the stop, up to the limit. */
  readonly stderr: string;
}

/** The error of a stop caused by an output past its cap. */
export function outputError(o: Checked, outputs: readonly Output[]): OutputError {
  const [stdout, stderr] = outputs as [Output, Output];
  const stringLimit = outputs.some((out) => out.overflowed && out.cap < o.maxBuffer);
  const limit = stringLimit
    ? `the longest string this JavaScript engine can hold (${MAX_OUTPUT_CHARS} characters; options.maxBuffer is ${o.maxBuffer})`
    : `options.maxBuffer (${o.maxBuffer} characters)`;
  const error = new ToolError(`${JSON.stringify(o.file)}: output exceeded ${limit}; the process tree was stopped, and the output read so far is on error.stdout and error.stderr`);
  return Object.assign(error, { stdout: stdout.text, stderr: stderr.text });
}
