/**
 * The token of the pool task running on this thread, behind `fullstop/worker`'s free functions.
 *
 * Each task gets its own `TaskBinding`, bound through AsyncLocalStorage for the task's whole async
 * life: a timer or callback that a task leaves behind keeps seeing that task's binding, never the
 * binding of whichever task runs when it fires. When the task settles its binding is marked `over`,
 * so such leftovers see a retired token (their checks throw) instead of the next task's token.
 *
 * Outside a pool task every function throws: a call there is a mistake (in a thread you start
 * yourself, use `tokenFromHandle(handle)`), and failing loudly beats a check that never fires.
 * Inside a task run without a token they are no-ops while the task runs: nothing can cancel such a
 * task cooperatively, and `sleep` just sleeps.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { cancelledError, checkRequiredMs, type CancelledError } from '../src/errors.js';
import type { SlotToken } from './worker-token.js';

/** One task's view of its token. */
export class TaskBinding {
  /** The task's token; `undefined` for a task run without one. */
  readonly token: SlotToken | undefined;
  /** True once the task settled: what it left behind sees a retired token. */
  over = false;

  constructor(token: SlotToken | undefined) {
    this.token = token;
  }

  /** The error a check throws once the task is over. */
  overError(): CancelledError {
    return cancelledError('the pool task is over (token retired): a timer or callback it left behind ran after it settled', { reason: 'retired' });
  }
}

/** The binding of each task, for everything the task starts; no store outside a task. */
const storage = new AsyncLocalStorage<TaskBinding>();

/**
 * The binding of the handler running synchronously now, `undefined` between handlers. While a
 * handler runs it is the store `storage` holds, so the checks read it instead of asking
 * AsyncLocalStorage, whose lookup touches several objects: on a worker just woken (a task that
 * slept, then calls `cancelTurn()`) that lookup was a large share of the call's way to its notify
 * (the bench's P3 row). Each function below reads it
 * itself (`running ?? outsideHandler(…)`): an expression as short as a call to a helper, and one
 * call fewer on the checks' hot path and on a thread just woken. What a task leaves behind runs
 * later, outside any handler, and finds its own task's binding through `storage`. One reading
 * differs: a function bound to an earlier task's async context (`AsyncResource.bind`) and called
 * synchronously by a running handler runs as part of that handler, and sees its binding.
 */
let running: TaskBinding | undefined;

/**
 * Call `fn(arg)` with `binding` as the task's binding for everything `fn` starts, sync or async.
 * The argument is passed through, not closed over: no closure per task on the worker's hot path.
 */
export function callBound<A, T>(binding: TaskBinding, fn: (arg: A) => T, arg: A): T {
  const outer = running;
  running = binding;
  try {
    return storage.run(binding, fn, arg);
  } finally {
    running = outer;
  }
}

/** The binding of the task running now, `undefined` outside a task (the probe worker wraps it). */
export function currentBinding(): TaskBinding | undefined {
  return running ?? storage.getStore();
}

/** The binding of a call made outside any running handler: what a task left behind finds its own task's; elsewhere it throws. */
function outsideHandler(what: string): TaskBinding {
  const b = storage.getStore();
  if (b === undefined) {
    throw new Error(`fullstop/worker: ${what}() was called outside a TurnPool task; in a thread you start yourself, use tokenFromHandle(handle)`);
  }
  return b;
}

/** Throws `CancelledError` if this task's token is cancelled or retired. */
export function checkCancelled(): void {
  const b = running ?? outsideHandler('checkCancelled');
  if (b.over) throw b.overError();
  const error = b.token?.checkError();
  if (error !== undefined) throw error;
}

/** True once this task's token is cancelled or retired (or the task is over). */
export function isCancelled(): boolean {
  const b = running ?? outsideHandler('isCancelled');
  return b.over || (b.token !== undefined && b.token.isCancelled());
}

/** Sleep up to `ms` on the token's slot: wakes at once on cancel or retire, then throws `CancelledError`. */
export function sleep(ms: number): void {
  const b = running ?? outsideHandler('sleep');
  checkRequiredMs('ms', ms);
  if (b.over) throw b.overError();
  if (b.token === undefined) return void sleepPlainly(ms);
  // Thrown here, not inside the token: one frame fewer to unwind on the thread just woken.
  const error = b.token.sleepOrError(ms);
  if (error !== undefined) throw error;
}

/**
 * `sleep` that returns instead of throwing: `false` at once on cancel or retire (or once the task
 * is over), `true` when `ms` ran out. For a loop that wants to wind down without an exception.
 */
export function sleepUnlessCancelled(ms: number): boolean {
  const b = running ?? outsideHandler('sleepUnlessCancelled');
  checkRequiredMs('ms', ms);
  if (b.over) return false;
  if (b.token !== undefined) return b.token.sleepUnlessCancelled(ms);
  sleepPlainly(ms);
  return true;
}

/** The sleep of a task run without a token: nothing can wake it early. */
function sleepPlainly(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** `checkCancelled()`, then block while the token's registry is paused; a stop wakes it and it throws. */
export function checkpoint(): void {
  const b = running ?? outsideHandler('checkpoint');
  if (b.over) throw b.overError();
  b.token?.checkpoint();
}

/** Cancel this task's turn from inside the worker; the main thread's `token.signal` aborts. */
export function cancelTurn(reason?: unknown): boolean {
  const b = running ?? outsideHandler('cancelTurn');
  const token = b.token;
  if (token === undefined || b.over) return false;
  // The task's own (child) slot too, so this task's next check throws without waiting for the
  // main thread to cascade the root's cancel down.
  const tripped = (token.root ?? token).cancel(reason);
  if (token.root !== undefined) token.cancel(reason);
  return tripped;
}
