/**
 * The TurnPool worker side: load the user's handler, bind each task's token for the task's
 * duration, unbind it when the task settles.
 *
 * Kept lean on purpose (issue #3, P5): the per-task path is a slab lookup, one small token object
 * and a direct call of the user's handler; no promise unless the handler returns one.
 */

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import {
  decodeTarget, NEED_SLAB, P_BUFFERS, P_GENERATION, P_INDEX, P_ROOT_GENERATION, P_ROOT_INDEX, P_ROOT_SLAB,
  P_SLAB, P_TASK, type Target,
} from '../src/pool/protocol.js';
import { bindSerial, NO_TOKEN, runConcurrent, type TaskBinding } from './current.js';
import { SlotToken } from './worker-token.js';

type Handler = (task: unknown) => unknown;
type Payload = unknown[];

/** Every slab buffer this worker has been sent, by slab id. */
const slabs = new Map<number, Int32Array>();

/** Called once per target by pool-entry.cjs (piscina caches the result). */
export async function handlerFor(encoded: string): Promise<Handler> {
  const target = decodeTarget(encoded);
  if (target === undefined) throw new Error(`fullstop: ${JSON.stringify(encoded)} is not a TurnPool task target`);
  const user = await loadHandler(target);
  return target.concurrent ? (payload) => runTaskConcurrent(user, payload as Payload) : (payload) => runTaskSerial(user, payload as Payload);
}

/** The same lookup piscina does: the module itself if it is a function, else its export `name`. */
async function loadHandler({ filename, name }: Target): Promise<Handler> {
  let mod: unknown;
  try {
    mod = createRequire(import.meta.url)(filename);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ERR_REQUIRE_ESM') throw e;
    mod = await import(pathToFileURL(filename).href);
  }
  let handler = typeof mod === 'function' ? mod : (mod as Record<string, unknown>)[name];
  if (typeof handler !== 'function' && name === 'default') handler = (mod as { default?: unknown }).default;
  if (typeof handler !== 'function') throw new Error(`No handler function "${name}" exported from ${filename}`);
  return handler as Handler;
}

function runTaskSerial(user: Handler, payload: Payload): unknown {
  const binding = bindingOf(payload);
  bindSerial(binding);
  let result: unknown;
  try {
    result = user(payload[P_TASK]);
  } catch (e) {
    bindSerial(undefined);
    throw e;
  }
  if (!isThenable(result)) {
    bindSerial(undefined);
    return result;
  }
  // The binding stays for the whole async task: piscina runs one task at a time per worker here.
  return Promise.resolve(result).finally(() => bindSerial(undefined));
}

function runTaskConcurrent(user: Handler, payload: Payload): unknown {
  return runConcurrent(bindingOf(payload), () => user(payload[P_TASK]));
}

function bindingOf(payload: Payload): TaskBinding {
  if (payload.length === 1) return NO_TOKEN;
  const buffers = payload[P_BUFFERS] as [number, SharedArrayBuffer][] | undefined;
  if (buffers !== undefined) for (const [id, buffer] of buffers) slabs.set(id, new Int32Array(buffer));
  const cells = slabs.get(payload[P_SLAB] as number);
  const hasRoot = payload[P_ROOT_SLAB] !== undefined;
  const rootCells = hasRoot ? slabs.get(payload[P_ROOT_SLAB] as number) : cells;
  if (cells === undefined || rootCells === undefined) {
    const missing = [payload[P_SLAB], payload[P_ROOT_SLAB]].filter((id) => id !== undefined && !slabs.has(id as number));
    throw new Error(NEED_SLAB + missing.join(','));
  }
  const token = new SlotToken(cells, payload[P_INDEX] as number, payload[P_GENERATION] as number);
  // A task dropped from the queue on cancel may still be posted to a worker: it must not run
  // (task-run.ts). One load decides it, before any user code.
  if (token.isCancelled()) throw token.error();
  if (!hasRoot) return token;
  token.root = new SlotToken(rootCells, payload[P_ROOT_INDEX] as number, payload[P_ROOT_GENERATION] as number);
  return token;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}
