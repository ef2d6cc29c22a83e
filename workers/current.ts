/**
 * The token of the pool task running on this thread, behind `fullstop/worker`'s free functions.
 *
 * With one task per worker at a time (piscina's default `concurrentTasksPerWorker: 1`) the binding
 * is a plain module variable, set before the handler is called and cleared when its result
 * settles — so it holds across the awaits of an async task at no cost. With several concurrent
 * tasks per worker the pool entry binds through AsyncLocalStorage instead (`bindConcurrent`).
 *
 * Outside a pool task every function throws: a call there is a mistake (in a thread you start
 * yourself, use `tokenFromHandle(handle)`), and failing loudly beats a check that never fires.
 * Inside a task run without a token they are no-ops: nothing can cancel such a task
 * cooperatively, and `sleep` just sleeps.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { checkRequiredMs } from '../src/errors.js';
import { SlotToken } from './worker-token.js';

/** A task with no token: checks pass, sleep sleeps. */
export const NO_TOKEN = 'none';
export type TaskBinding = SlotToken | typeof NO_TOKEN;

let current: TaskBinding | undefined;
let concurrent: AsyncLocalStorage<TaskBinding> | undefined;

export function bindSerial(binding: TaskBinding | undefined): void {
  current = binding;
}

export function runConcurrent<T>(binding: TaskBinding, fn: () => T): T {
  concurrent ??= new AsyncLocalStorage();
  return concurrent.run(binding, fn);
}

/** The binding of the task running now, `undefined` outside a task (the probe worker wraps it). */
export function currentBinding(): TaskBinding | undefined {
  return concurrent?.getStore() ?? current;
}

function binding(what: string): TaskBinding {
  const b = concurrent?.getStore() ?? current;
  if (b === undefined) {
    throw new Error(`fullstop/worker: ${what}() was called outside a TurnPool task; in a thread you start yourself, use tokenFromHandle(handle)`);
  }
  return b;
}

/** Throws `CancelledError` if this task's token is cancelled or retired. */
export function checkCancelled(): void {
  const b = binding('checkCancelled');
  if (b !== NO_TOKEN) b.checkCancelled();
}

/** True once this task's token is cancelled or retired. */
export function isCancelled(): boolean {
  const b = binding('isCancelled');
  return b !== NO_TOKEN && b.isCancelled();
}

/** Sleep up to `ms` on the token's slot: wakes at once on cancel or retire, then throws `CancelledError`. */
export function sleep(ms: number): void {
  const b = binding('sleep');
  if (b !== NO_TOKEN) return b.sleep(ms);
  checkRequiredMs('ms', ms);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** `checkCancelled()`, then block while the token's registry is paused; a stop wakes it and it throws. */
export function checkpoint(): void {
  const b = binding('checkpoint');
  if (b !== NO_TOKEN) b.checkpoint();
}

/** Cancel this task's turn from inside the worker; the main thread's `token.signal` aborts. */
export function cancelTurn(reason?: unknown): boolean {
  const b = binding('cancelTurn');
  if (b === NO_TOKEN) return false;
  // The task's own (child) slot too, so this task's next check throws without waiting for the
  // main thread to cascade the root's cancel down.
  const tripped = (b.root ?? b).cancel(reason);
  if (b.root !== undefined) b.cancel(reason);
  return tripped;
}
