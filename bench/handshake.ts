// What main and the bench's workers agree on. The clock is `process.hrtime.bigint()`, one monotonic
// clock for every thread of the process, so stamps from two threads subtract directly.
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { TokenHandle } from '../workers/runtime.js';

export const now = () => process.hrtime.bigint();
export const usSince = (t0: bigint, t1: bigint) => Number(t1 - t0) / 1000;
export const step = (x: number) => (Math.imul(x, 1103515245) + 12345) | 0; // work the JIT cannot drop (its result is reported back)
export const settle = () => delay(1); // main's pause after READY before it acts, so the worker really is blocked or spinning

/** Cells: READY (the worker is where its sample starts), GO (the raw floors' "go"), SPARE (never written: a timed wait). */
export const [READY, GO, SPARE] = [0, 1, 2];
export const flagCells = () => new Int32Array(new SharedArrayBuffer(16));
/** The pool suites' task file (bench/workers/tasks.ts), as the file URL a user would pass. */
export const TASKS = new URL('./workers/tasks.js', import.meta.url).href;

/** P3: a task trips its turn TRIP_AFTER_MS in (main is idle by then) and lingers LINGER_MS (its reply cannot come first). SQ1: POLL_EVERY. */
export const [TRIP_AFTER_MS, LINGER_MS, POLL_EVERY] = [2, 5, 1000];

export function sayReady(flags: Int32Array): void {
  Atomics.store(flags, READY, 1);
  Atomics.notify(flags, READY);
}

/** Clear READY, `start` the sample and resolve (with its promise, boxed) once its worker said READY; reject if it settled first. */
export async function started<T>(flags: Int32Array, what: string, start: () => Promise<T>): Promise<{ running: Promise<T> }> {
  Atomics.store(flags, READY, 0);
  const running = start();
  const wait = Atomics.waitAsync(flags, READY, 0);
  if (wait.async) await Promise.race([wait.value, running.then(
    (v) => { if (Atomics.load(flags, READY) === 0) throw new Error(`${what}: settled before it was ready (value ${String(v)})`); },
    (e) => { throw new Error(`${what}: failed before it was ready`, { cause: e }); },
  )]);
  return { running };
}

const PREBUILT = new Error('the turn is cancelled');

/** A floor's stamp once it noticed; `shape`: after throwing and catching a pre-built Error, the API's shape. */
export function noticed(shape: boolean | undefined): bigint {
  if (shape !== true) return now();
  try {
    throw PREBUILT;
  } catch (e) {
    if (e === PREBUILT) return now();
    throw e;
  }
}

/** Main → raw worker: one floor sample (bench/workers/raw.ts says what each kind does). */
export type RawCommand = { kind: 'wait' } | { kind: 'loop'; id: number; loopMs: number; handle?: TokenHandle } | { kind: 'cancel'; id: number };

/** Raw worker → main: its stamp; `ok` false if it woke from no block (or SQ1's loop ran out); `loopEndedAt`: SQ1. */
export type RawReport = { at: bigint; ok: boolean; sink: number; loopEndedAt?: bigint };

/** The raw floors' plain worker (bench/workers/raw.ts). */
export class RawWorker {
  readonly flags = flagCells();
  readonly worker = new Worker(new URL('./workers/raw.js', import.meta.url), { workerData: { flags: this.flags } });
  readonly online = once(this.worker, 'online');
  close = () => this.worker.terminate();
  /** Post one command; `act` runs once the worker is ready; resolves with its report and act's value. */
  async sample<A>(command: RawCommand, act: () => A | Promise<A>): Promise<{ report: RawReport; acted: A }> {
    Atomics.store(this.flags, GO, 0);
    const { running } = await started(this.flags, `raw ${command.kind}`, async () => {
      const report = once(this.worker, 'message') as Promise<[RawReport]>;
      this.worker.postMessage(command);
      return (await report)[0];
    });
    const acted = await act();
    return { report: await running, acted };
  }
}
