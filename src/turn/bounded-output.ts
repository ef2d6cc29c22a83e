/**
 * What the history keeps of a big tool output: its head and its tail around a
 * `… N bytes omitted …` line, within a byte bound (`TurnRunner` `maxOutputBytes`). The first error
 * and the last lines are what a reader needs; the middle of a 64 MB log is not worth a stop's time.
 *
 * A value is serialised once: the JSON text that measures it is the text that is cut (a value under
 * the bound is parsed back, as the history records plain JSON).
 *
 * Whatever `maxOutputBytes` is, what is recorded fits one ledger line (`LEDGER_MAX_LINE_BYTES`):
 * its JSON in the entry (escapes included: a control character takes 6 bytes there, a quote 2) is
 * at most `MAX_RECORDED_JSON_BYTES`, and an output past that is cut further. The body and the
 * `tool_output` event still get the whole value.
 */

import { LEDGER_MAX_LINE_BYTES } from '../constants.js';
import { cutText, isHighSurrogate, isLowSurrogate, utf8Bytes } from '../base/head-tail.js';
import { jsonText } from '../base/json.js';

/** Room a ledger line keeps for an entry's other fields (ids of up to 1,024 characters, escaped, and the rest). */
const ENTRY_ROOM_BYTES = 64 * 1024;
/** The most bytes a recorded output takes as JSON in its entry's line. */
export const MAX_RECORDED_JSON_BYTES = LEDGER_MAX_LINE_BYTES - ENTRY_ROOM_BYTES;
/** A JSON string takes at most 6 bytes a UTF-8 byte (`\u0001` for 0x01), plus its quotes. */
const MAX_ESCAPE_RATIO = 6;

/** `value` as the history records it, within `maxBytes`; a TypeError naming `name` when JSON cannot encode it. */
export function recordable(name: string, value: unknown, maxBytes: number): unknown {
  return recordableCut(name, value, maxBytes).value;
}

/** `recordableCut(name, value, maxBytes)` and the bytes of its text it leaves out (0 when none). */
export function recordableCut(name: string, value: unknown, maxBytes: number): { value: unknown; omittedBytes: number } {
  // A string is cut as itself, not as its JSON text (whose escapes a reader would see doubled).
  if (typeof value === 'string') {
    const cut = recordableText(value, maxBytes);
    return { value: cut.text, omittedBytes: cut.omittedBytes };
  }
  const text = jsonText(name, value);
  if (text === undefined) return { value: undefined, omittedBytes: 0 };
  // Parsed back, it is written as this very text: its size in the line is its UTF-8 size.
  if (utf8Bytes(text) <= Math.min(maxBytes, MAX_RECORDED_JSON_BYTES)) return { value: JSON.parse(text), omittedBytes: 0 };
  const cut = recordableText(text, maxBytes);
  return { value: cut.text, omittedBytes: cut.omittedBytes };
}

/**
 * `text` cut to `maxBytes` (`cutText`), and further where its JSON would not fit a ledger line
 * (`MAX_RECORDED_JSON_BYTES`); `omittedBytes` always counts against the whole `text`.
 */
export function recordableText(text: string, maxBytes: number): { text: string; omittedBytes: number } {
  let bound = Math.min(maxBytes, MAX_RECORDED_JSON_BYTES);
  for (let tries = 0; ; tries++) {
    const cut = cutText(text, bound);
    const bytes = utf8Bytes(cut.text);
    // Escapes can at most multiply it by MAX_ESCAPE_RATIO: below that, no need to count them.
    if (bytes * MAX_ESCAPE_RATIO + 2 <= MAX_RECORDED_JSON_BYTES) return cut;
    const json = jsonStringBytes(cut.text, bytes);
    if (json <= MAX_RECORDED_JSON_BYTES) return cut;
    // Cut again in proportion (a head and a tail escape much as the whole did); after a few tries,
    // a bound that fits whatever the escapes.
    bound = tries < 3
      ? Math.floor(bytes * (MAX_RECORDED_JSON_BYTES / json) * 0.99)
      : Math.floor((MAX_RECORDED_JSON_BYTES - 1024) / MAX_ESCAPE_RATIO);
  }
}

/** Control characters JSON writes in two bytes: `\b`, `\t`, `\n`, `\f`, `\r`. */
const SHORT_ESCAPES = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

/**
 * The bytes of `text` as a JSON string (`JSON.stringify`, quotes included), given its UTF-8 size:
 * counted without building it (its escapes could make it longer than a string may be). One pass of
 * `charCodeAt`, whatever the text: a regex stepping from escape to escape cost 0.1 µs an escape,
 * 2.5 s for 23 MB of control characters.
 */
function jsonStringBytes(text: string, utf8: number): number {
  let extra = 0;
  for (let at = 0; at < text.length; at++) {
    const unit = text.charCodeAt(at);
    if (unit >= 0x20 && unit !== 0x22 && unit !== 0x5c && (unit < 0xd800 || unit > 0xdfff)) continue;
    if (unit < 0x20) extra += SHORT_ESCAPES.has(unit) ? 1 : 5; // `\n` is 2 bytes, `\u0001` 6
    else if (unit === 0x22 || unit === 0x5c) extra += 1; // `\"`, `\\`
    else if (isHighSurrogate(unit) && isLowSurrogate(text.charCodeAt(at + 1))) at += 1; // a pair: its 4 UTF-8 bytes
    else extra += 3; // a lone surrogate: `\udXXX` (6) where UTF-8 counted U+FFFD (3)
  }
  return utf8 + 2 + extra;
}
