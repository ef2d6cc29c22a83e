/**
 * What the history records of a caller's value: the JSON a reader will get back.
 */

import { renderSafely } from './render.js';

/** `value` as the JSON a reader will get back, or a TypeError naming `name` when JSON cannot encode it. */
export function asJson(name: string, value: unknown): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (cause) {
    throw new TypeError(`${name}: cannot be recorded as JSON (${renderSafely(cause)})`, { cause });
  }
  return text === undefined ? undefined : JSON.parse(text);
}
