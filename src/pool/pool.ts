/**
 * `TurnPool`: a `Piscina` whose tasks stop in microseconds when their token is cancelled, and are
 * hard-stopped only when they do not listen. It is a piscina (subclass) reached through piscina's
 * public API only: events, statics, `close`/`destroy`/dispose and every getter but `options` are
 * piscina's own; `run` and `options` are replaced (piscina sees the pool's worker entry and
 * load balancer, `options` shows the user's). What it adds: each task's token travels to the
 * worker as numbers (protocol.ts), the cancel rules live in task-run.ts, options are read in
 * options.ts, per-worker bookkeeping in worker-book.ts; this file starts runs and keeps the counts.
 */

import type { TransferListItem } from 'node:worker_threads';
import { Piscina, queueOptionsSymbol, transferableSymbol, valueSymbol } from 'piscina';
import { StopReasons } from '../constants.js';
import { abortedTaskError, CancelledError, describe } from '../errors.js';
import { activeToken } from '../token/context.js';
import { TurnRegistry } from '../token/registry.js';
import { sharedRootSlot, sharedSlot } from '../token/places.js';
import { isCancelToken, type CancelToken } from '../token/token.js';
import { CLOSING_REASON, IdleWait } from './close.js';
import { queueOptionsFor } from './dispatch.js';
import {
  ENTRY, onAbort, readRunOptions, setupPool, TOKEN_ONLY, toPath, type PiscinaOptions, type PiscinaRunOptions, type PoolSetup,
  type Signal,
} from './options.js';
import { encodePayload, encodeTarget } from './protocol.js';
import { WorkerBook } from './worker-book.js';
import { TaskRun, type RunHost, type Settlement, type SignalCause } from './task-run.js';

export interface TurnPoolOptions extends PiscinaOptions {
  /**
   * How long a cancelled task may run on before its worker is terminated, when its token (or its
   * `signal`) is cancelled directly (a `TurnRunner` stop brings its own grace). `0` terminates at
   * once, as piscina does on abort.
   * @default 100
   */
  graceMs?: number;
}

export interface TurnPoolRunOptions extends PiscinaRunOptions {
  /** The token to bind in the worker. Default: `activeToken()` (the turn this call runs in), if any. */
  token?: CancelToken;
  /**
   * Piscina's abort signal (an `AbortSignal` or an EventEmitter with an `'abort'` event). It gets
   * the cooperative-then-hard stop; inside a turn the task's token is still a child of the turn's,
   * so a stop of the turn reaches the task too. Its rejection is piscina's `AbortError`.
   */
  signal?: Signal | null;
  /** Overrides the pool's `graceMs` for this task. */
  graceMs?: number;
}

export interface TurnPoolStats {
  /** Tasks that ran and settled, with a value or an error (cooperative stops included). */
  completed: number;
  /** Cancelled tasks that settled by themselves within the grace window. */
  cooperativeStops: number;
  /** Cancelled tasks whose worker was terminated (or condemned, when it ran other tasks too). */
  hardStops: number;
  /** Tasks on a worker now. */
  running: number;
  /** Tasks waiting for a worker. */
  queued: number;
}

/** A task as read once, before anything is set up for it (a throwing getter changes nothing). */
interface ReadTask { value: unknown; transfers: TransferListItem[] | undefined; queueOptions: unknown }

/**
 * @example
 * const pool = new TurnPool({ filename: new URL('./tool.js', import.meta.url).href, maxThreads: 2 });
 * const token = turns.beginTurn('s1');
 * const result = await pool.run({ n: 42 }, { token }); // in tool.js: checkpoint() between phases
 */
export class TurnPool<T = any, R = any> extends Piscina<T, R> {
  /** The pool's grace window in ms (see `TurnPoolOptions.graceMs`). */
  readonly graceMs: number;
  readonly #setup: PoolSetup;
  /** The encoded targets (plain, wrapped) of the pool's own filename and name; `undefined`s when the pool has no filename. */
  readonly #defaultTargets: [string | undefined, string | undefined];
  /** Encoded targets by `filename\0name\0wrapped`. */
  readonly #targets = new Map<string, string>();
  /** Piscina's run options by target, for the common task (`#plainSubmit`). */
  readonly #submitOptions = new Map<string, PiscinaRunOptions>();
  /** Tokens made for tasks run with a plain `signal` outside any turn. */
  readonly #signalTokens = new TurnRegistry();
  #signalSeq = 0;
  readonly #workers: WorkerBook;
  /**
   * Tasks handed to piscina and not yet settled there. A task dropped on cancel can still sit in
   * piscina's queue until a worker refuses it; it is counted here and in `queueSize` alike, so
   * `running` stays right.
   */
  #inFlight = 0;
  /** True once `close()` was called: new tasks are refused, as piscina refuses them while it closes. */
  #closing = false;
  /** The close under way or done; `undefined` until `close()` is first called (a second call joins it). */
  #closed: Promise<void> | undefined;
  /** The wait of a `close()` for the tasks it must let end (close.ts). */
  readonly #idle = new IdleWait();
  #completed = 0;
  #cooperativeStops = 0;
  #hardStops = 0;
  /** `options` as the user gave them; `undefined` until first read. */
  #optionsView: (Piscina['options'] & { graceMs: number }) | undefined;
  readonly #host: RunHost = {
    onSettled: (run, how) => this.#onSettled(run, how),
    onStarted: (run) => this.#workers.sendSlabs(run),
    hardStop: (run) => this.#workers.hardStop(run),
    onAbandonedLeft: (run) => this.#workers.abandonedLeft(run),
  };

  constructor(options: TurnPoolOptions = {}) {
    const setup = setupPool(options);
    super(setup.piscina);
    this.#setup = setup;
    this.graceMs = setup.graceMs;
    this.#workers = new WorkerBook(setup.condemned, {
      terminate: (threadId) => this.#terminate(threadId),
      liveThreadIds: () => this.threads.map((worker) => worker.threadId),
      maxThreads: this.maxThreads,
    }, super.options.concurrentTasksPerWorker > 1);
    this.#defaultTargets = setup.filename === null ? [undefined, undefined]
      : [this.#target(setup.filename, setup.name, false), this.#target(setup.filename, setup.name, true)];
  }

  /** Piscina's options, with the filename, name and load balancer as given (not the pool's wrappers). */
  override get options(): Piscina['options'] & { graceMs: number } {
    return (this.#optionsView ??= Object.assign(Object.create(null), super.options, {
      filename: this.#setup.filename, name: this.#setup.name, loadBalancer: this.#setup.loadBalancer, graceMs: this.graceMs,
    }));
  }

  /**
   * `Piscina.run`, plus `token` and `graceMs`. Never throws: a bad argument rejects the returned
   * promise (`TypeError`/`RangeError`, nothing started), as piscina's own checks do.
   */
  override run<V = R>(task: T, options: TurnPoolRunOptions = NO_OPTIONS): Promise<V> {
    if (this.#closing) return super.run(task, { signal: AbortSignal.abort(CLOSING_REASON), filename: ENTRY }) as unknown as Promise<V>;
    try {
      return this.#run(task, options) as Promise<V>;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #run(task: unknown, options: TurnPoolRunOptions): Promise<unknown> {
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object');
    const o = readRunOptions(options);
    if (o === TOKEN_ONLY) return this.#runTokenOnly(task, options.token);
    if (o.token !== undefined && !isCancelToken(o.token)) throw new TypeError(`options.token: expected a CancelToken, got ${describe(o.token)}`);
    const token = (o.token as CancelToken | undefined) ?? activeToken();
    const wrapped = token !== undefined || o.signal != null;
    const target = o.filename == null && o.name == null ? this.#defaultTargets[wrapped ? 1 : 0]
      : this.#targetOf(o.filename as string | null | undefined, o.name as string | null | undefined, wrapped);
    if (target === undefined) throw new Error('filename must be provided to run() or in options object');
    const transferList = o.transferList as TransferListItem[] | undefined;
    if (!wrapped) return this.#runPlain(task, transferList, target);
    const read = readTask(task, transferList);
    const graceMs = (o.graceMs as number | undefined) ?? this.graceMs;
    if (o.signal != null) return this.#runWithSignal(read, target, token, o.signal as Signal, graceMs);
    return this.#startRun(read.value, read.transfers, read.queueOptions, target, token!, graceMs, undefined, undefined);
  }

  /**
   * The common case, `run(task, { token })` with nothing else: the same steps as `#run`, minus the
   * reads and objects the other options need (this path is per task, on the main thread).
   */
  #runTokenOnly(task: unknown, token: unknown): Promise<unknown> {
    if (token === undefined) return this.#run(task, NO_OPTIONS); // `{ token: undefined }`: the turn's token, if any
    if (!isCancelToken(token)) throw new TypeError(`options.token: expected a CancelToken, got ${describe(token)}`);
    const target = this.#defaultTargets[1];
    if (target === undefined) throw new Error('filename must be provided to run() or in options object');
    if (task === null || typeof task !== 'object') return this.#startRun(task, undefined, undefined, target, token, this.graceMs, undefined, undefined);
    const read = readTask(task, undefined);
    return this.#startRun(read.value, read.transfers, read.queueOptions, target, token, this.graceMs, undefined, undefined);
  }

  /** No token, no signal: the task goes to piscina as it is. */
  #runPlain(task: unknown, transferList: TransferListItem[] | undefined, target: string): Promise<unknown> {
    this.#inFlight++;
    return super.run(task as T, { transferList: transferList as never, filename: ENTRY, name: target }).then(this.#plainValue, this.#plainError);
  }

  // Made once, not per task (and `then`, not `finally`, which costs two more promises a task).
  readonly #plainValue = (value: unknown): unknown => {
    this.#plainSettled();
    return value;
  };

  readonly #plainError = (error: unknown): never => {
    this.#plainSettled();
    throw error;
  };

  #plainSettled(): void {
    this.#inFlight--;
    this.#completed++;
    this.#workers.reap();
    this.#idle.check();
  }

  /**
   * A plain signal cancels a token of this task's own: a child of the turn's token when there is
   * one (a stop of the turn still reaches the task), else a fresh root. It stops this task only.
   */
  #runWithSignal(read: ReadTask, target: string, parent: CancelToken | undefined, signal: Signal, graceMs: number): Promise<unknown> {
    if ((signal as { aborted?: unknown }).aborted) return Promise.reject(abortedTaskError((signal as { reason?: unknown }).reason, { hard: false }));
    if (parent !== undefined && !isLive(parent)) return Promise.reject(notStarted(parent));
    const own = parent === undefined ? this.#signalTokens.beginTurn(`signal-${++this.#signalSeq}`) : parent.child();
    const cause: SignalCause = { aborted: false, reason: undefined };
    const stop = onAbort(signal, () => {
      if (own.isCancelled()) return; // the turn's stop came first: it is the cause
      cause.aborted = true;
      cause.reason = (signal as { reason?: unknown }).reason;
      own.cancel(cause.reason ?? StopReasons.user);
    });
    return this.#startRun(read.value, read.transfers, read.queueOptions, target, own, graceMs, () => { stop(); own.retire(); }, cause);
  }

  #startRun(value: unknown, transfers: TransferListItem[] | undefined, queueOptions: unknown, target: string, token: CancelToken,
    graceMs: number, release: (() => void) | undefined, signal: SignalCause | undefined): Promise<unknown> {
    if (!isLive(token)) {
      release?.();
      return Promise.reject(notStarted(token));
    }
    const payload = encodePayload(value, sharedSlot(token), sharedRootSlot(token));
    // A task with a plain signal follows piscina's abortable rules exactly (task-run.ts).
    const run = new TaskRun(this.#host, token, graceMs, signal !== undefined, payload);
    run.release = release;
    run.signal = signal;
    (payload as unknown as Record<symbol, unknown>)[queueOptionsSymbol] = queueOptionsFor(queueOptions, run);
    this.#submit(run, payload, transfers, target);
    return run.promise;
  }

  #submit(run: TaskRun, payload: unknown[], transfers: TransferListItem[] | undefined, target: string): void {
    const options = !run.abortable && transfers === undefined ? this.#plainSubmit(target)
      : { signal: run.abortable ? run as never : null, transferList: transfers as never, filename: ENTRY, name: target };
    this.#inFlight++;
    let result: Promise<unknown>;
    try {
      result = super.run(payload as T, options);
    } catch (error) {
      // A custom task queue that throws: the run ends here, its owner and token with it.
      this.#inFlight--;
      return run.rejectWith(error);
    }
    result.then(
      (value) => { this.#inFlight--; run.resolveWith(value); this.#idle.check(); },
      (error) => { this.#inFlight--; run.rejectWith(error); this.#idle.check(); },
    );
  }

  /** Piscina's options for a task with neither a signal nor transfers: one object per target (piscina copies it). */
  #plainSubmit(target: string): PiscinaRunOptions {
    let options = this.#submitOptions.get(target);
    if (options === undefined) this.#submitOptions.set(target, (options = Object.freeze({ signal: null, filename: ENTRY, name: target })));
    return options;
  }

  #onSettled(run: TaskRun, how: Settlement): void {
    if (how === 'value' || how === 'error' || how === 'cooperative') this.#completed++;
    if (how === 'cooperative') this.#cooperativeStops++;
    else if (how === 'hard') this.#hardStops++;
    if (how === 'error') this.#workers.unsend(run);
    this.#workers.reap();
  }

  #terminate(threadId: number): void {
    void this.threads.find((worker) => worker.threadId === threadId)?.terminate();
  }

  /**
   * Piscina's `close()`: new tasks are refused at once (piscina's `AbortError`); the tasks running
   * (and, without `force`, those queued) are let end, then the workers are destroyed. A cancelled
   * task that ignores its token ends at its hard stop (the end of its grace, or of the stop's), and
   * the close then resolves at once. `force: true` rejects the queued tasks instead of running them
   * (piscina's `AbortError`, once the running ones have ended). A task that never ends holds the
   * close for `closeTimeout`, after which piscina's own close runs (and its timeout applies again).
   *
   * @example
   * process.once('SIGTERM', async () => { await runner.shutdown({ deadlineMs: 5_000 }); await pool.close(); });
   */
  override close(options: { force?: boolean } = {}): Promise<void> {
    // A bad argument is piscina's own rejection, with nothing changed.
    if (options === null || typeof options !== 'object' || (options.force !== undefined && typeof options.force !== 'boolean')) return super.close(options);
    if (options.force === true) {
      this.#setup.gate.held = true;
      this.#idle.check(); // a close already waiting now waits for the running tasks only
    }
    return (this.#closed ??= this.#close());
  }

  async #close(): Promise<void> {
    this.#closing = true;
    const gate = this.#setup.gate;
    // Held (force), a queued task is left to piscina to reject; otherwise it runs, and is waited for.
    const idle = () => this.#inFlight - (gate.held ? this.queueSize : 0) <= 0;
    // A worker coming up changes `queueSize` (piscina counts a starting worker's room as taken).
    const recheck = () => queueMicrotask(() => this.#idle.check());
    this.on('workerCreate', recheck);
    try {
      await this.#idle.until(idle, super.options.closeTimeout);
    } finally {
      this.off('workerCreate', recheck);
    }
    return super.close({ force: gate.held });
  }

  /** Counts of this pool's tasks since it was made (`running`/`queued` are now). */
  stats(): TurnPoolStats {
    const queued = this.queueSize;
    return {
      completed: this.#completed,
      cooperativeStops: this.#cooperativeStops,
      hardStops: this.#hardStops,
      running: Math.max(0, this.#inFlight - queued),
      queued,
    };
  }

  /** The encoded target of a run that names its own filename or export; `undefined` without a filename. */
  #targetOf(filename: string | null | undefined, name: string | null | undefined, wrapped: boolean): string | undefined {
    const path = filename == null ? this.#setup.filename : toPath(filename);
    return path === null ? undefined : this.#target(path, name ?? this.#setup.name, wrapped);
  }

  #target(filename: string, name: string, wrapped: boolean): string {
    const key = `${filename}\0${name}\0${wrapped ? 1 : 0}`;
    let target = this.#targets.get(key);
    if (target === undefined) this.#targets.set(key, (target = encodeTarget({ filename, name, wrapped })));
    return target;
  }
}

const NO_OPTIONS: TurnPoolRunOptions = Object.freeze({});

function isLive(token: CancelToken): boolean {
  return !token.retired && !token.isCancelled();
}

function notStarted(token: CancelToken): CancelledError {
  return new CancelledError(`pool task not started: turn ${token.turnId ?? '(none)'} of session ${token.sessionId} is ${token.retired ? 'over' : 'cancelled'}`, {
    reason: token.reason, sessionId: token.sessionId, turnId: token.turnId,
  });
}

/**
 * Every read of the user's task, once each, before anything is set up for it: `Piscina.move()`'s
 * wrapper (it must not end up inside the payload) and the task's own queue options. A moved value
 * is known by piscina's public Transferable interface (`transferableSymbol` and `valueSymbol`);
 * piscina also reads a private mark that `move()` sets, so one difference remains: a Transferable
 * run with a token but never passed to `move()` is moved here, where piscina would clone it as a
 * plain object (without its symbol keys).
 */
function readTask(task: unknown, transferList: TransferListItem[] | undefined): ReadTask {
  if (task === null || typeof task !== 'object') return { value: task, transfers: transferList, queueOptions: undefined };
  const t = task as Record<symbol, unknown>;
  const queueOptions = t[queueOptionsSymbol];
  if (!(transferableSymbol in t) || !(valueSymbol in t)) return { value: task, transfers: transferList, queueOptions };
  return { value: t[valueSymbol], transfers: [...(transferList ?? []), t[transferableSymbol] as TransferListItem], queueOptions };
}

