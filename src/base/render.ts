/**
 * Text for values the turn did not choose: a stop reason, a thrown value, a listener's error.
 * `String(value)` can throw (`Object.create(null)`, a throwing `toString`, a hostile Proxy), and a
 * stop or an outcome must never break on the way to writing down why it happened, so every place
 * that needs such text goes through `renderSafely`.
 */

import { renderReason } from '../errors.js';

/** The longest rendering kept: a reason or message is a label, not a payload. */
const MAX_CHARS = 2000;

/**
 * A string for any value, never throwing: an Error's message (its `name: message` when the name
 * says more than "Error"), else `renderReason(value)` (errors.ts: `String(value)`, or a
 * description that runs none of the value's code when that throws), cut to MAX_CHARS.
 *
 * @example
 * renderSafely(new TypeError('bad')) // 'TypeError: bad'
 * renderSafely(Object.create(null))  // '[object (null prototype)]'
 * renderSafely(undefined)            // 'undefined'
 */
export function renderSafely(value: unknown): string {
  const text = tryRender(value);
  return text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS - 3)}...` : text;
}

function tryRender(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    if (value instanceof Error) {
      const { name, message } = value;
      if (typeof message === 'string') return typeof name === 'string' && name !== 'Error' ? `${name}: ${message}` : message;
    }
  } catch {
    // A Proxy or a throwing getter: fall through to the plainer forms.
  }
  return renderReason(value);
}

/** An Error's message, else `renderSafely(value)`; never throws (for outputs and statuses that want the bare message). */
export function messageOf(value: unknown): string {
  try {
    if (value instanceof Error && typeof value.message === 'string') return renderSafely(value.message);
  } catch {
    // a hostile Error: fall back to the safe rendering
  }
  return renderSafely(value);
}
