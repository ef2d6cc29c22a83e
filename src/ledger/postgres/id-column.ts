/**
 * Ids in the text columns (`session_id`, `turn_id`, `owner`). PostgreSQL's text holds no NUL and
 * node-postgres writes a lone surrogate as U+FFFD, so written as given, two ids differing only
 * there would share one turn row, and one session would read another's history. The columns hold
 * each id escaped instead (src/base/escaped-id.ts): one-to-one, unchanged unless it holds `%`, NUL
 * or a lone surrogate. Entry bodies (JSON) keep the ids as given.
 */

import { escapeId, unescapeId } from '../../base/escaped-id.js';

/** `id` as its column holds it. */
export function idColumn(id: string): string {
  return escapeId(id, true);
}

/** The id a column holds. */
export function idOfColumn(column: string): string {
  return unescapeId(column);
}
