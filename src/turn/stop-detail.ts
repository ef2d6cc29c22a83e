/**
 * A stop's `detail`: the text of the reason a caller's signal aborted with (`run`'s `signal`), kept
 * beside the stop's reason code and never taken for it (DESIGN §11.2). A framework's wording
 * ("Client connection prematurely closed.", "user pressed stop", an Error, a DOMException) says
 * what happened to the request; the reason code (`signalReason`) says what the stop is, and is
 * what the history's texts follow.
 *
 * The text is bounded (`MAX_STOP_DETAIL_LENGTH` characters) and made storable everywhere a stop is
 * written: well-formed (a lone surrogate becomes U+FFFD, which node-redis and node-postgres would
 * write anyway) and without NUL (PostgreSQL's text refuses it).
 */

import { MAX_STOP_DETAIL_LENGTH } from '../constants.js';
import { renderSafely } from '../base/render.js';

/** `reason` as a stop's `detail`: its text (an Error's `name: message`), bounded and storable; never throws. */
export function stopDetail(reason: unknown): string {
  let text = renderSafely(reason);
  if (text.length > MAX_STOP_DETAIL_LENGTH) {
    text = `${text.slice(0, MAX_STOP_DETAIL_LENGTH - 1)}…`;
  }
  // After the cut: a slice may end between the halves of a pair, which this mends.
  return text.toWellFormed().replaceAll('\0', '\uFFFD');
}
