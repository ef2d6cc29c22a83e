/**
 * Ids in stores that cannot hold every JavaScript string. An id is any non-empty string (at most
 * `MAX_ID_LENGTH` characters), but a store that keeps text as UTF-8 has no form for a lone
 * surrogate (node-redis and node-postgres both write it as U+FFFD), and PostgreSQL's text refuses
 * NUL. Written as given, two ids that differ only there would share a key or a row: one session's
 * stop would reach another's turn, one session's history another's prompt. So such a store gets
 * each id escaped: `%` as `%25`, a lone surrogate as `%uXXXX` and, where asked, NUL as `%u0000`.
 * The escape is one-to-one and leaves every other id unchanged; `unescapeId` gives the id back.
 */

const ESCAPE = /%|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const ESCAPE_WITH_NUL = /%|\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const UNESCAPE = /%(25|u[0-9A-F]{4})/g;

const escapeOne = (c: string) => (c === '%' ? '%25' : `%u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);

/** `id` well-formed (and without NUL when `nul` is true), distinct for distinct ids. */
export function escapeId(id: string, nul = false): string {
  if (!id.includes('%') && id.isWellFormed() && !(nul && id.includes('\0'))) return id;
  return id.replace(nul ? ESCAPE_WITH_NUL : ESCAPE, escapeOne);
}

/** The id `escapeId` was given. */
export function unescapeId(escaped: string): string {
  if (!escaped.includes('%')) return escaped;
  return escaped.replace(UNESCAPE, (_, e: string) => (e === '25' ? '%' : String.fromCharCode(Number.parseInt(e.slice(1), 16))));
}
