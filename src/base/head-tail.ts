/**
 * Head and tail of a long text around one `… N bytes omitted …` line: what exec keeps past
 * `maxBuffer`, what the history keeps of a big tool output or of a call's progress, and what the
 * model sees of a cut call. The first error and the last lines are what a reader needs. Cuts fall on
 * character boundaries (never inside a UTF-8 sequence or a surrogate pair).
 */

/** The line that stands for the `bytes` left out between a head and a tail. */
export function omittedLine(bytes: number): string {
  return `… ${bytes} bytes omitted …`;
}

/**
 * The one shape of a cut text, whoever cut it (exec's streams, the history's outputs and progress,
 * the model's partials): `head`, a newline, the omitted-bytes line, a newline, `tail`.
 */
export function joinCut(head: string, omittedBytes: number, tail: string): string {
  return `${head}\n${omittedLine(omittedBytes)}\n${tail}`;
}

/**
 * The one split of a byte budget between a head and a tail: the head gets the odd byte (the first
 * error is what a reader looks for first). exec's `maxBuffer`, the history's `maxOutputBytes` and
 * `toModelMessages`' budget all split this way; a call's progress keeps more tail by design
 * (`MAX_PROGRESS_BYTES`: the latest output is what a stopped call is judged by).
 */
export function splitBudget(maxBytes: number): { head: number; tail: number } {
  const head = Math.ceil(maxBytes / 2);
  return { head, tail: maxBytes - head };
}

/** The UTF-8 length of `text` (counted, not encoded). */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** A head slice without a trailing high surrogate (a slice may split a pair; its half would encode as U+FFFD). */
export function headChars(text: string): string {
  return text.length > 0 && isHighSurrogate(text.charCodeAt(text.length - 1)) ? text.slice(0, -1) : text;
}
/** A tail slice without a leading low surrogate (as `headChars`). */
export function tailChars(text: string): string {
  return text.length > 0 && isLowSurrogate(text.charCodeAt(0)) ? text.slice(1) : text;
}
/** True for the first half of a surrogate pair: a cut just after it splits a character. */
export const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff;
/** True for the second half of a surrogate pair: a cut just before it splits a character. */
export const isLowSurrogate = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * `text` when it fits `maxBytes` (UTF-8); else its first and last bytes (`splitBudget`: half each,
 * the odd one to the head, cut on character boundaries) with `\n… N bytes omitted …\n` between, N counting the bytes left out.
 *
 * @example
 * headAndTail('a'.repeat(100), 20) // 'aaaaaaaaaa\n… 80 bytes omitted …\naaaaaaaaaa'
 */
export function headAndTail(text: string, maxBytes: number): string {
  return cutText(text, maxBytes).text;
}

/** `headAndTail(text, maxBytes)` and the bytes of `text` it leaves out (0 when it fits). */
export function cutText(text: string, maxBytes: number): { text: string; omittedBytes: number } {
  const total = utf8Bytes(text);
  if (total <= maxBytes) return { text, omittedBytes: 0 };
  const room = splitBudget(maxBytes);
  // Each UTF-16 unit is at most 3 UTF-8 bytes: n units hold at least n bytes of text.
  const head = headBytes(headChars(text.slice(0, room.head)), room.head);
  const tail = tailBytes(tailChars(lastUnits(text, room.tail)), room.tail);
  const omittedBytes = total - head.bytes - tail.bytes;
  return { text: joinCut(head.text, omittedBytes, tail.text), omittedBytes };
}

/**
 * The cut of a text that was cut before: `head`, then `omittedBytes` bytes already left out, then
 * `tail`. Within `maxBytes` the head comes from `head` and the tail from `tail`, and the line counts
 * every byte of the original left out (those already omitted and those cut now), so a second cut
 * never understates how much output there was.
 *
 * @example
 * cutAround('a'.repeat(50), 1000, 'b'.repeat(50), 20).text // 'aaaaaaaaaa\n… 1080 bytes omitted …\nbbbbbbbbbb'
 */
export function cutAround(head: string, omittedBytes: number, tail: string, maxBytes: number): { text: string; omittedBytes: number } {
  if (omittedBytes === 0) return cutText(head + tail, maxBytes);
  const headTotal = utf8Bytes(head);
  const tailTotal = utf8Bytes(tail);
  let kept = { head, tail, bytes: headTotal + tailTotal };
  if (kept.bytes > maxBytes) {
    // Half each; an end shorter than its half leaves the rest of the budget to the other.
    const headRoom = Math.max(splitBudget(maxBytes).head, maxBytes - tailTotal);
    const h = headBytes(headChars(head.slice(0, headRoom)), headRoom);
    const t = tailBytes(tailChars(lastUnits(tail, maxBytes - h.bytes)), maxBytes - h.bytes);
    kept = { head: h.text, tail: t.text, bytes: h.bytes + t.bytes };
  }
  const omitted = omittedBytes + headTotal + tailTotal - kept.bytes;
  return { text: joinCut(kept.head, omitted, kept.tail), omittedBytes: omitted };
}

/**
 * `text` split at its omitted-bytes line for `omittedBytes` (the first such line), the way
 * `cutAround` takes it; `undefined` when it holds no such line.
 */
export function splitAtOmitted(text: string, omittedBytes: number): { head: string; tail: string } | undefined {
  const line = `\n${omittedLine(omittedBytes)}\n`;
  const at = text.indexOf(line);
  return at < 0 ? undefined : { head: text.slice(0, at), tail: text.slice(at + line.length) };
}

/** The last `n` UTF-16 units of `text` (none for 0: `slice(-0)` would be all of it). */
function lastUnits(text: string, n: number): string {
  return n > 0 ? text.slice(-n) : '';
}

/**
 * A copy of `text` that holds nothing else: a slice (and a rope of slices) keeps its whole parent
 * string alive, so a bounded store of slices of big strings is bounded in characters, not memory.
 * UTF-16 round trip: exact, lone surrogates included.
 */
export function ownCopy(text: string): string {
  return Buffer.from(text, 'utf16le').toString('utf16le');
}

/** The longest start of `text` of at most `max` UTF-8 bytes that ends on a character boundary. */
export function headBytes(text: string, max: number): { text: string; bytes: number } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return { text, bytes: bytes.length };
  let end = max;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // not inside a character
  return { text: bytes.toString('utf8', 0, end), bytes: end };
}

/** The longest end of `text` of at most `max` UTF-8 bytes that starts on a character boundary. */
export function tailBytes(text: string, max: number): { text: string; bytes: number } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return { text, bytes: bytes.length };
  let start = bytes.length - max;
  while (start < bytes.length && (bytes[start]! & 0xc0) === 0x80) start++;
  return { text: bytes.toString('utf8', start), bytes: bytes.length - start };
}
