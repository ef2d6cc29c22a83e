/**
 * The TurnPool worker side: load the user's handler as piscina would, bind each task's token for
 * the task's whole async life, mark the binding over when the task settles.
 *
 * Kept lean on purpose: the per-task path is a slab lookup, one small token object, one binding
 * and a direct call of the user's handler; no promise unless the handler returns one.
 */

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { decodePayload, DecodedPlaces, decodeTarget, type Target } from '../src/pool/protocol.js';
import { callBound, TaskBinding } from './current.js';
import { sendableError, sendableResult } from './sendable.js';
import { SlotToken } from './worker-token.js';

type Handler = (task: unknown) => unknown;
type Payload = unknown[];

/** The places of the task being bound: one object for every task of this worker (protocol.ts). */
const places = new DecodedPlaces();
/** Every slab buffer this worker has been sent, by slab id. */
const slabs = new Map<number, Int32Array>();
const requireHere = createRequire(import.meta.url);

/**
 * The handler piscina caches for one target. The user's module is loaded at the first task, not
 * when the worker starts: a module that throws, exits or never settles at import then fails that
 * task with its own error (piscina would swallow the `require` error, and a worker that exits
 * while starting up leaves the queue waiting for ever). A failed load is tried again by the next
 * task, as piscina does.
 */
export function handlerFor(encoded: string): Handler {
  const target = decodeTarget(encoded);
  if (target === undefined) throw new Error(`fullstop: ${JSON.stringify(encoded)} is not a TurnPool task target`);
  const run = target.wrapped ? runTask : runPlainTask;
  let user: Handler | undefined;
  let loading: Promise<Handler> | undefined;
  const load = (): Promise<Handler> => (loading ??= loadHandler(target).then(
    (handler) => (user = handler),
    (error: unknown) => { loading = undefined; throw error; },
  ));
  return (payload) => user !== undefined ? run(user, payload as never) : load().then((handler) => run(handler, payload as never));
}

/** The user's handler for a target: its export (`loadExport`), which must be a function. */
async function loadHandler(target: Target): Promise<Handler> {
  const handler = await loadExport(target);
  if (typeof handler !== 'function') {
    throw new TypeError(`No handler function exported from ${target.filename}: its export ${JSON.stringify(target.name)} is ${handler === undefined ? 'missing' : `a ${typeof handler}`}`);
  }
  return handler as Handler;
}

/**
 * The user's module is loaded here, not by piscina: piscina loads the pool's entry (pool-entry.cts),
 * which must wrap each call, and it has no public loader to hand the user's filename to. So this
 * follows the rules piscina documents for `filename` and `name` (its own suite checks them against
 * a TurnPool), with the causes kept: `require` first (CommonJS, and a module whose export is a
 * promise of the handler), then `import()` for what `require` cannot load (ESM, top-level await).
 * The export is the module itself if it is a function, else `name` (awaited: an async-initialised
 * module exports a promise). Rejects only if the module fails to load; what the export is, the
 * caller checks (the probe, workers/probe-task.ts, reports both its own way).
 */
export async function loadExport({ filename, name }: Pick<Target, 'filename' | 'name'>): Promise<unknown> {
  let mod: unknown;
  let requireError: unknown;
  try {
    mod = interop(requireHere(filename));
  } catch (e) {
    requireError = e;
  }
  const handler: unknown = typeof mod === 'function' ? mod : mod === undefined ? undefined : await (mod as Record<string, unknown>)[name];
  if (typeof handler === 'function') return handler;
  let namespace: Record<string, unknown>;
  try {
    namespace = await import(pathToFileURL(filename).href) as Record<string, unknown>;
  } catch (e) {
    // `require` found the file but it is ESM, or has top-level await: the import error is the cause.
    // A file `require` could not find at all: say so as piscina does ("Cannot find module").
    throw loadError(e, requireError);
  }
  return await namespace[name];
}

/** TypeScript's `__importStar`, as piscina's compiled `require` sees a module. */
function interop(mod: unknown): unknown {
  if (mod !== null && typeof mod === 'object' && (mod as { __esModule?: unknown }).__esModule) return mod;
  const view: Record<string, unknown> = {};
  if (mod !== null && mod !== undefined) {
    for (const key of Object.getOwnPropertyNames(mod)) if (key !== 'default') view[key] = (mod as Record<string, unknown>)[key];
  }
  view.default = mod;
  return view;
}

/** Which of the two attempts names the cause. */
function loadError(importError: unknown, requireError: unknown): unknown {
  const code = (requireError as { code?: unknown } | undefined)?.code;
  // Not found, ESM, top-level await: `import()` was the real attempt (and says "Cannot find module").
  if (requireError === undefined || code === 'MODULE_NOT_FOUND' || code === 'ERR_REQUIRE_ESM' || code === 'ERR_REQUIRE_ASYNC_MODULE') return importError;
  // A CommonJS module that threw while loading: its own error, not the import's rerun of it.
  return requireError;
}

/**
 * One task: its binding holds for everything the handler starts, and is marked over when the
 * handler settles (leftovers then see a retired token, current.ts).
 */
function runTask(user: Handler, payload: Payload): unknown {
  const task = decodePayload(payload, places);
  return runWith(user, bindingOf(places), task);
}

/** A task run without a token: the checks pass, `sleep` sleeps (current.ts). */
function runPlainTask(user: Handler, task: unknown): unknown {
  return runWith(user, new TaskBinding(undefined), task);
}

/** Also turns an outcome piscina could not post back into an error the task rejects with (sendable.ts). */
function runWith(user: Handler, binding: TaskBinding, task: unknown): unknown {
  let result: unknown;
  try {
    result = callBound(binding, user, task);
  } catch (e) {
    binding.over = true;
    throw sendableError(e);
  }
  if (!isThenable(result)) {
    binding.over = true;
    return sendableResult(result);
  }
  return Promise.resolve(result).then(
    (value) => { binding.over = true; return sendableResult(value); },
    (error: unknown) => { binding.over = true; throw sendableError(error); },
  );
}

/** The binding of the task whose places were just decoded. */
function bindingOf(p: DecodedPlaces): TaskBinding {
  if (p.buffers !== undefined) for (const [id, buffer] of p.buffers) slabs.set(id, new Int32Array(buffer));
  const cells = slabs.get(p.slab);
  const rootCells = p.hasRoot ? slabs.get(p.rootSlab) : cells;
  if (cells === undefined || rootCells === undefined) {
    // The pool sends every slab with the first task that needs it on this thread (protocol.ts).
    throw new Error(`fullstop: internal error: this worker was never sent slab ${cells === undefined ? p.slab : p.rootSlab}`);
  }
  const token = new SlotToken(cells, p.index, p.generation);
  // A task dropped from the queue on cancel may still be posted to a worker: it must not run
  // (task-run.ts). One load decides it, before any user code.
  if (token.isCancelled()) throw token.error();
  if (p.hasRoot) token.root = new SlotToken(rootCells, p.rootIndex, p.rootGeneration);
  return new TaskBinding(token);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}
