/**
 * Reading `TurnPool`'s options as piscina reads its own: own enumerable properties only (a
 * prototype's are ignored), piscina's checks with piscina's messages for piscina's options, and
 * fullstop's checks for fullstop's. The user's filename and export name are packed into piscina's
 * `name` (protocol.ts); piscina itself only ever sees the pool's worker entry.
 */

import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import { DEFAULT_GRACE_MS } from '../constants.js';
import { checkMs, describe } from '../errors.js';
import { leastBusy, observeStarts, type QueueGate, type WorkerView } from './dispatch.js';
import { encodeTarget } from './protocol.js';

export type PiscinaOptions = NonNullable<ConstructorParameters<typeof Piscina>[0]>;
export type PiscinaRunOptions = NonNullable<Parameters<Piscina['run']>[1]>;
export type Signal = NonNullable<PiscinaRunOptions['signal']>;

/** The file every pool worker starts from (workers/pool-entry.cjs). */
export const ENTRY = fileURLToPath(new URL('../../workers/pool-entry.cjs', import.meta.url));

/** What the constructor works out before piscina's constructor runs. */
export interface PoolSetup {
  graceMs: number;
  /** The user's default filename as a path; `null` when every `run` must name one. */
  filename: string | null;
  name: string;
  /** The user's balancer, shown in `options` (piscina gets it wrapped). */
  loadBalancer: PiscinaOptions['loadBalancer'];
  /** Workers that take no new task, by thread id (dispatch.ts). */
  condemned: Map<number, Condemned>;
  /** Held by a forced close while it waits for the running tasks (dispatch.ts). */
  gate: QueueGate;
  piscina: PiscinaOptions;
}

/**
 * A worker whose stopped task ignored its grace while it had neighbours; it ends when they settle,
 * or when `deadline` fires (one more grace window: a task that blocks its thread starves them).
 */
export interface Condemned { worker: WorkerView; abandoned: number; deadline: NodeJS.Timeout }

/** Check `TurnPool`'s options (a TypeError/RangeError naming a bad one) and work out its setup. */
export function setupPool(options: unknown): PoolSetup {
  if (options != null && typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const own = Object.assign(Object.create(null), options) as PiscinaOptions & { graceMs?: unknown };
  const { graceMs = DEFAULT_GRACE_MS, filename, name, loadBalancer } = own;
  delete own.graceMs;
  checkMs('options.graceMs', graceMs);
  if (typeof filename !== 'string' && filename != null) throw new TypeError('options.filename must be a string or null');
  if (typeof name !== 'string' && name != null) throw new TypeError('options.name must be a string or null');
  if (loadBalancer !== undefined && (typeof loadBalancer !== 'function' || loadBalancer.length < 1)) {
    throw new TypeError('options.loadBalancer must be a function with at least two args');
  }
  const path = filename ? toPath(filename) : null; // piscina: an empty filename is no filename
  const exportName = name ?? 'default';
  const condemned = new Map<number, Condemned>();
  const gate: QueueGate = { held: false };
  const balancer = observeStarts((loadBalancer ?? leastBusy(own.concurrentTasksPerWorker ?? 1)) as never, condemned, gate);
  return {
    graceMs: graceMs as number,
    filename: path,
    name: exportName,
    loadBalancer,
    condemned,
    gate,
    piscina: {
      ...own,
      filename: path === null ? null : ENTRY,
      name: path === null ? 'default' : encodeTarget({ filename: path, name: exportName, wrapped: false }),
      loadBalancer: balancer as never,
    },
  };
}

/**
 * A file URL becomes a path; `./x.js` is taken from the current directory, where piscina's
 * `import()` fallback finds it too. A bare specifier stays as given (`require` resolves it).
 */
export function toPath(filename: string): string {
  if (filename.startsWith('file:')) return fileURLToPath(filename);
  return !isAbsolute(filename) && (filename.startsWith('./') || filename.startsWith('../')) ? resolve(filename) : filename;
}

/** `run`'s options as read. */
export interface RunOptionsRead {
  transferList: unknown; filename: unknown; name: unknown; signal: unknown; token: unknown; graceMs: unknown;
}

const NOTHING_READ: RunOptionsRead = Object.freeze({
  transferList: undefined, filename: undefined, name: undefined, signal: undefined, token: undefined, graceMs: undefined,
});

/**
 * Returned (as a mark, never read) when the options are `{ token }` alone, the common
 * case: the caller then reads `token` itself, once, and has nothing else to check.
 */
export const TOKEN_ONLY: RunOptionsRead = Object.freeze({ ...NOTHING_READ });

/**
 * Read `run`'s options once (a getter runs once), then piscina's checks with its messages
 * (its callers match on them); a bad one rejects. `Object.keys` is what piscina's `Object.assign`
 * copy reads too (own enumerable properties), without building a dictionary object on every task.
 */
export function readRunOptions(options: object): RunOptionsRead {
  if (isTokenOnly(options)) return TOKEN_ONLY;
  const keys = Object.keys(options);
  if (keys.length === 0) return NOTHING_READ;
  if (keys.length === 1 && keys[0] === 'token') return TOKEN_ONLY;
  const o: RunOptionsRead = { transferList: undefined, filename: undefined, name: undefined, signal: undefined, token: undefined, graceMs: undefined };
  for (const key of keys) {
    if (key === 'transferList' || key === 'filename' || key === 'name' || key === 'signal' || key === 'token' || key === 'graceMs') {
      o[key] = (options as Record<string, unknown>)[key];
    }
  }
  if (o.transferList !== undefined && !Array.isArray(o.transferList)) throw new TypeError('transferList argument must be an Array');
  if (o.filename != null && typeof o.filename !== 'string') throw new TypeError('filename argument must be a string');
  if (o.filename === '') throw new TypeError('options.filename: expected a path or a file URL, got ""');
  if (o.name != null && typeof o.name !== 'string') throw new TypeError('name argument must be a string');
  if (o.signal != null) {
    if (typeof o.signal !== 'object') throw new TypeError('signal argument must be an object');
    if (!('addEventListener' in o.signal) && typeof (o.signal as { once?: unknown }).once !== 'function') {
      throw new TypeError(`options.signal: expected an AbortSignal or an EventEmitter with an 'abort' event, got ${describe(o.signal)}`);
    }
  }
  checkMs('options.graceMs', o.graceMs);
  return o;
}

/**
 * `{ token }` alone, found without building the key list `Object.keys` makes (this is per task).
 * `for…in` also walks inherited keys: any besides an own `token` sends the caller to `Object.keys`,
 * which then decides as before.
 */
function isTokenOnly(options: object): boolean {
  let seen = false;
  for (const key in options) {
    if (key !== 'token' || seen) return false;
    seen = true;
  }
  return seen && Object.hasOwn(options, 'token');
}

/** Listen once for the signal's abort, as piscina does for either kind; returns the remover. */
export function onAbort(signal: Signal, listener: () => void): () => void {
  if ('addEventListener' in signal) {
    signal.addEventListener('abort', listener, { once: true });
    return () => signal.removeEventListener('abort', listener);
  }
  signal.once('abort', listener);
  return () => signal.off('abort', listener);
}
