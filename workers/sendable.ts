/**
 * A task's outcome that piscina cannot post back to the main thread becomes an error the task
 * rejects with, decided in the task's own wrapper before piscina sees it. Left to piscina, a
 * result (or a thrown value) that structured cloning refuses throws from piscina's `postMessage`
 * in a microtask: the worker dies and the task rejects with an empty object.
 *
 * The check is a post on a private, closed MessagePort: a port serializes what it is given even
 * once closed (the HTML spec's rule, which Node follows) and then drops it, so the check costs one
 * serialization, with the very serializer piscina's post uses, where `structuredClone` would add
 * a deserialization (about 2–3× the cost for an object, measured on Node 20). Values that always
 * clone (primitives but symbols) skip it. A `move()`d result that fails it is still sent: piscina
 * transfers its value and never posts the wrapper (piscina's own wrappers hold nothing a post
 * would copy, so they pass the check as an empty object).
 */

import { createRequire } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

/** Never delivers anything: closed before first use. */
const probe = new MessageChannel().port1;
probe.close();

/**
 * piscina's public Transferable symbols, loaded on first need only: loading piscina's entry adds
 * tens of ms to a worker's start (a respawn after a hard stop waits for it), and only a result that
 * fails the check needs them.
 */
let symbols: { transferableSymbol: symbol; valueSymbol: symbol } | undefined;
const requireHere = createRequire(import.meta.url);

/** `value` itself when piscina can post it as a task's result, else throws a TypeError saying why. */
export function sendableResult(value: unknown): unknown {
  const why = unsendable(value);
  if (why !== undefined) throw new TypeError(`the task's result cannot be sent to the main thread (${why})`);
  return value;
}

/** The error to reject with: `error` itself when piscina can post it, else a TypeError saying why. */
export function sendableError(error: unknown): unknown {
  const why = unsendable(error);
  return why === undefined ? error : new TypeError(`the error the task threw cannot be sent to the main thread (${why})`);
}

/** `undefined` when `value` can be posted, else the serializer's complaint. */
function unsendable(value: unknown): string | undefined {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function' && typeof value !== 'symbol')) return undefined;
  try {
    probe.postMessage(value);
    return undefined;
  } catch (e) {
    if (isTransferable(value)) return undefined;
    return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
}

/** What `move()` returns: piscina posts its value with its transfer list, never the object itself. */
function isTransferable(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const { transferableSymbol, valueSymbol } = (symbols ??= requireHere('piscina') as NonNullable<typeof symbols>);
  return transferableSymbol in value && valueSymbol in value;
}
