/**
 * How a session or turn id travels to Redis. node-redis writes strings as UTF-8, which has no form
 * for a lone surrogate (it is written as U+FFFD), so two ids that differ only there — strings cut
 * in the middle of an emoji — would share keys, records and messages: one session's stop would
 * cancel the other's turn. Every id therefore goes to Redis escaped, `%` as `%25` and a lone
 * surrogate as `%uXXXX` (src/base/escaped-id.ts), which is one-to-one and leaves every other id
 * unchanged, and comes back through `fromWire`. (Node ids, the prefix and stop reasons are refused
 * instead when not well-formed: they are configuration and codes, not user data.)
 */

import { escapeId, unescapeId } from '../base/escaped-id.js';

/** `id` as written to Redis: well-formed, and distinct for distinct ids. */
export function toWire(id: string): string {
  return escapeId(id);
}

/** The id `toWire` wrote. */
export function fromWire(wire: string): string {
  return unescapeId(wire);
}

/** `value` must be well-formed UTF-16 (no lone surrogate), or Redis would store another string. */
export function checkWellFormed(name: string, value: string): void {
  if (!value.isWellFormed()) {
    throw new TypeError(`${name}: expected a well-formed string (it holds a lone surrogate, which Redis cannot store as UTF-8), got ${JSON.stringify(value)}`);
  }
}
