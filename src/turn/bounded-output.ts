/**
 * What the history keeps of a big tool output: its head and its tail around a
 * `… N bytes omitted …` line, within a byte bound (`TurnRunner` `maxOutputBytes`). The first error
 * and the last lines are what a reader needs; the middle of a 64 MB log is not worth a stop's time.
 *
 * A value is serialised once: the JSON text that measures it is the text that is cut (a value under
 * the bound is parsed back, as the history records plain JSON).
 */

import { cutText, utf8Bytes } from '../base/head-tail.js';
import { jsonText } from '../base/json.js';

/** `value` as the history records it, within `maxBytes`; a TypeError naming `name` when JSON cannot encode it. */
export function recordable(name: string, value: unknown, maxBytes: number): unknown {
  return recordableCut(name, value, maxBytes).value;
}

/** `recordable(name, value, maxBytes)` and the bytes of its text it leaves out (0 when none). */
export function recordableCut(name: string, value: unknown, maxBytes: number): { value: unknown; omittedBytes: number } {
  // A string is cut as itself, not as its JSON text (whose escapes a reader would see doubled).
  if (typeof value === 'string') {
    const cut = cutText(value, maxBytes);
    return { value: cut.text, omittedBytes: cut.omittedBytes };
  }
  const text = jsonText(name, value);
  if (text === undefined) return { value: undefined, omittedBytes: 0 };
  if (utf8Bytes(text) <= maxBytes) return { value: JSON.parse(text), omittedBytes: 0 };
  const cut = cutText(text, maxBytes);
  return { value: cut.text, omittedBytes: cut.omittedBytes };
}
