/**
 * `TurnPool`: a drop-in for Piscina whose tasks stop in microseconds when their token is
 * cancelled, and are hard-stopped only when they do not listen. It composes a `Piscina`; every
 * piscina option passes through. The cancel rules live in task-run.ts; this file validates at the
 * boundary, builds payloads (protocol.ts) and keeps the counts.
 */

import { fileURLToPath } from 'node:url';
import type { TransferListItem } from 'node:worker_threads';
import { Piscina, queueOptionsSymbol, transferableSymbol, valueSymbol } from 'piscina';
import { CancelledError, checkMs, describe } from '../errors.js';
import { activeToken } from '../token/context.js';
import { TurnRegistry } from '../token/registry.js';
import type { TokenState } from '../token/state.js';
import { isCancelToken, STATE, type CancelToken } from '../token/token.js';
import { leastBusy, observeStarts, queueOptionsFor } from './dispatch.js';
import { encodeTarget, NEED_SLAB, P_BUFFERS } from './protocol.js';
import { TaskRun, type RunHost, type Settlement } from './task-run.js';
import { slabById } from '../token/slab.js';

type PiscinaOptions = NonNullable<ConstructorParameters<typeof Piscina>[0]>;

export interface TurnPoolOptions extends PiscinaOptions {
  /**
   * How long a cancelled task may run on before its worker is terminated, when its token is
   * cancelled directly (a `TurnRunner` stop brings its own grace).
   * @default 100
   */
  graceMs?: number;
}

export interface TurnPoolRunOptions {
  /** The token to bind in the worker. Default: `activeToken()` when no `signal` is given. */
  token?: CancelToken;
  /** A plain AbortSignal gets the same cooperative-then-hard treatment as a token. */
  signal?: AbortSignal;
  name?: string;
  filename?: string;
  transferList?: TransferListItem[];
  /** Overrides the pool's `graceMs` for this task. */
  graceMs?: number;
}

export interface TurnPoolStats {
  /** Tasks that ran and settled, with a value or an error (cooperative stops included). */
  completed: number;
  /** Cancelled tasks that settled by themselves within the grace window. */
  cooperativeStops: number;
  /** Cancelled tasks whose worker was terminated. */
  hardStops: number;
  /** Tasks on a worker now. */
  running: number;
  /** Tasks waiting for a worker. */
  queued: number;
}

const ENTRY = fileURLToPath(new URL('../../workers/pool-entry.cjs', import.meta.url));
const DEFAULT_GRACE_MS = 100;

/**
 * @example
 * const pool = new TurnPool({ filename: new URL('./tool.js', import.meta.url).href, maxThreads: 2 });
 * const token = turns.beginTurn('s1');
 * const result = await pool.run({ n: 42 }, { token }); // in tool.js: checkpoint() between phases
 */
export class TurnPool implements RunHost {
  readonly graceMs: number;
  readonly #piscina: Piscina;
  readonly #defaultFilename: string | null;
  readonly #defaultName: string;
  /** The encoded target of the pool's own filename and name; `undefined` when the pool has no filename. */
  readonly #defaultTarget: string | undefined;
  readonly #concurrent: boolean;
  /** Tasks with a token go to piscina as abortable only when workers run several at once (task-run.ts). */
  readonly #abortable: boolean;
  /** Encoded targets by `filename\0name` (piscina caches a handler per distinct name). */
  readonly #targets = new Map<string, string>();
  /** Tokens made for tasks run with a plain `signal`. */
  readonly #signalTokens = new TurnRegistry();
  #signalSeq = 0;
  /**
   * Tasks handed to piscina and not yet settled there. A task dropped on cancel can still sit in
   * piscina's queue until a worker refuses it; it is counted here and in `queueSize` alike, so
   * `running` stays right.
   */
  #inFlight = 0;
  /** Tasks that ran and settled with a value or an error (cooperative stops included). */
  #completed = 0;
  #cooperativeStops = 0;
  #hardStops = 0;

  constructor(options: TurnPoolOptions = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
    const { graceMs = DEFAULT_GRACE_MS, filename, name, loadBalancer, ...rest } = options;
    checkMs('options.graceMs', graceMs);
    if (filename != null && typeof filename !== 'string') throw new TypeError(`options.filename: expected a string or a file URL string, got ${describe(filename)}`);
    if (name != null && typeof name !== 'string') throw new TypeError(`options.name: expected a string, got ${describe(name)}`);
    this.graceMs = graceMs;
    this.#defaultFilename = filename == null ? null : toPath(filename);
    this.#defaultName = name ?? 'default';
    this.#concurrent = (rest.concurrentTasksPerWorker ?? 1) > 1;
    this.#abortable = this.#concurrent;
    const balancer = loadBalancer ?? leastBusy(rest.concurrentTasksPerWorker ?? 1);
    this.#defaultTarget = this.#defaultFilename === null ? undefined : this.#target(this.#defaultFilename, this.#defaultName);
    this.#piscina = new Piscina({
      ...rest,
      filename: ENTRY,
      name: this.#defaultTarget ?? 'default',
      loadBalancer: observeStarts(balancer as never) as never,
    });
  }

  /**
   * Same shape as `Piscina.run`. Bad arguments throw at once (`TypeError`/`RangeError`, nothing is
   * started); everything else — a cancel, the task's own error — rejects the returned promise.
   */
  run<R = unknown>(task: unknown, options: TurnPoolRunOptions = {}): Promise<R> {
    if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
    const { signal, transferList } = options;
    let { token } = options;
    if (token !== undefined && !isCancelToken(token)) throw new TypeError(`options.token: expected a CancelToken, got ${describe(token)}`);
    if (signal != null && !(signal instanceof AbortSignal)) throw new TypeError(`options.signal: expected an AbortSignal, got ${describe(signal)}`);
    checkMs('options.graceMs', options.graceMs);
    if (options.filename != null && typeof options.filename !== 'string') throw new TypeError(`options.filename: expected a string or a file URL string, got ${describe(options.filename)}`);
    if (options.name != null && typeof options.name !== 'string') throw new TypeError(`options.name: expected a string, got ${describe(options.name)}`);
    const name = options.filename == null && options.name == null ? this.#defaultTarget : this.#targetOf(options);
    if (name === undefined) throw new TypeError('options.filename: no filename given to the TurnPool or to run()');
    const [value, transfers] = unwrapMovable(task, transferList);

    if (token === undefined && signal == null) token = activeToken();
    if (token === undefined && signal == null) return this.#runPlain([value], transfers, name);
    const graceMs = options.graceMs ?? this.graceMs;
    if (signal == null) return this.#runWithToken<R>(value, transfers, name, token!, graceMs, undefined);
    const bound = this.#tokenForSignal(token, signal);
    return this.#runWithToken<R>(value, transfers, name, bound.token, graceMs, bound.release);
  }

  #runPlain<R>(payload: unknown[], transferList: TransferListItem[] | undefined, name: string): Promise<R> {
    this.#inFlight++;
    return this.#piscina.run(payload, { transferList: transferList as never, filename: ENTRY, name }).finally(() => {
      this.#inFlight--;
      this.#completed++;
    });
  }

  #runWithToken<R>(task: unknown, transferList: TransferListItem[] | undefined, name: string, token: CancelToken, graceMs: number,
    release: (() => void) | undefined): Promise<R> {
    const state = token[STATE];
    if (state.retired || state.isCancelled()) {
      release?.();
      return Promise.reject(new CancelledError(`pool task not started: turn ${token.turnId ?? '(none)'} of session ${token.sessionId} is ${state.retired ? 'over' : 'cancelled'}`, {
        reason: token.reason, sessionId: token.sessionId, turnId: token.turnId,
      }));
    }
    const run = new TaskRun(this, token, graceMs, this.#abortable);
    run.release = release;
    const payload = payloadFor(task, state);
    (payload as unknown as Record<symbol, unknown>)[queueOptionsSymbol] = queueOptionsFor(task, run);
    this.#submit(run, payload, transferList, name);
    return run.promise as Promise<R>;
  }

  #submit(run: TaskRun, payload: unknown[], transferList: TransferListItem[] | undefined, name: string): void {
    const options = { signal: run.abortable ? run as never : null, transferList: transferList as never, filename: ENTRY, name };
    this.#inFlight++;
    this.#piscina.run(payload, options).then(
      (value) => {
        this.#inFlight--;
        run.resolveWith(value);
      },
      (error) => {
        this.#inFlight--;
        const missing = missingSlabs(error);
        if (missing === undefined || run.done || run.aborted) return run.rejectWith(error);
        // The worker had never seen this slab: send it once, with the buffers.
        payload[P_BUFFERS] = missing.map((id) => [id, slabById(id)!.buffer]);
        run.started = false;
        this.#submit(run, payload, transferList, name);
      },
    );
  }

  /** @internal RunHost: the hard stop of a task that is not abortable in piscina's sense. */
  terminate(threadId: number): void {
    void this.#piscina.threads.find((worker) => worker.threadId === threadId)?.terminate();
  }

  /**
   * A plain signal (with or without a token) cancels a token of this task's own: a fresh root when
   * there is no token, else a child (the signal stops this task only, never the turn).
   */
  #tokenForSignal(token: CancelToken | undefined, signal: AbortSignal): { token: CancelToken; release: () => void } {
    const own = token === undefined ? this.#signalTokens.beginTurn(`signal-${++this.#signalSeq}`) : token.child();
    const onAbort = () => own.cancel(signal.reason ?? 'cancel.user');
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    return { token: own, release: () => { signal.removeEventListener('abort', onAbort); own.retire(); } };
  }

  /** @internal RunHost */
  onSettled(how: Settlement): void {
    if (how === 'value' || how === 'error' || how === 'cooperative') this.#completed++;
    if (how === 'cooperative') this.#cooperativeStops++;
    else if (how === 'hard') this.#hardStops++;
  }

  stats(): TurnPoolStats {
    const queued = this.#piscina.queueSize;
    return {
      completed: this.#completed,
      cooperativeStops: this.#cooperativeStops,
      hardStops: this.#hardStops,
      running: Math.max(0, this.#inFlight - queued),
      queued,
    };
  }

  /** Waits for running and queued tasks, then ends every worker. */
  close(options?: { force?: boolean }): Promise<void> { return this.#piscina.close(options); }
  /** Ends every worker now; pending tasks reject. */
  destroy(): Promise<void> { return this.#piscina.destroy(); }
  [Symbol.asyncDispose](): Promise<void> { return this.destroy(); }

  /** The piscina underneath, for what TurnPool does not wrap (`threads`, `utilization`, events). */
  get piscina(): Piscina { return this.#piscina; }

  /** The encoded target of a run that names its own filename or export; `undefined` without a filename. */
  #targetOf(options: TurnPoolRunOptions): string | undefined {
    const filename = options.filename == null ? this.#defaultFilename : toPath(options.filename);
    return filename === null ? undefined : this.#target(filename, options.name ?? this.#defaultName);
  }

  #target(filename: string, name: string): string {
    const key = `${filename}\0${name}`;
    let target = this.#targets.get(key);
    if (target === undefined) this.#targets.set(key, (target = encodeTarget({ filename, name, concurrent: this.#concurrent })));
    return target;
  }
}

function toPath(filename: string): string {
  return filename.startsWith('file:') ? fileURLToPath(filename) : filename;
}

function payloadFor(task: unknown, state: TokenState): unknown[] {
  const { slab, index, generation } = state.exportSlot();
  let root = state;
  while (root.parent !== undefined) root = root.parent;
  if (root === state) return [task, slab.id, index, generation];
  const r = root.exportSlot();
  return [task, slab.id, index, generation, r.slab.id, r.index, r.generation];
}

/** `Piscina.move()` wraps a value; the wrapper must not end up inside our payload. */
function unwrapMovable(task: unknown, transferList: TransferListItem[] | undefined): [unknown, TransferListItem[] | undefined] {
  if (task === null || typeof task !== 'object' || (task as Record<symbol, unknown>)[valueSymbol] === undefined) return [task, transferList];
  const moved = (task as Record<symbol, unknown>)[transferableSymbol] as TransferListItem;
  return [(task as Record<symbol, unknown>)[valueSymbol], [...(transferList ?? []), moved]];
}

function missingSlabs(error: unknown): number[] | undefined {
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== 'string' || !message.startsWith(NEED_SLAB)) return undefined;
  return message.slice(NEED_SLAB.length).split(',').map(Number);
}

