/**
 * What the history records of a caller's value: the JSON a reader will get back.
 */

import { renderSafely } from './render.js';

/** `value`'s JSON text (undefined where JSON has none), or a TypeError naming `name` when JSON cannot encode it. */
export function jsonText(name: string, value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (cause) {
    throw new TypeError(`${name}: cannot be recorded as JSON (${renderSafely(cause)})`, { cause });
  }
}

/** `value` as the JSON a reader will get back, or a TypeError naming `name` when JSON cannot encode it. */
export function asJson(name: string, value: unknown): unknown {
  const text = jsonText(name, value);
  return text === undefined ? undefined : JSON.parse(text);
}
