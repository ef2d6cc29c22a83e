/**
 * An entry as a row and back. The entry is checked and rendered by the file ledger's own
 * `renderEntry`, so a `PgLedger` keeps exactly the file ledger's entry objects; the row's `body`
 * is that JSON without its `seq`, which is the row's own column (the database assigns it).
 */

import { renderEntry, type LedgerEntry } from '../entry.js';
import type { Row } from './appender.js';

/** What `renderEntry` writes before the rest of the line when given seq 0. */
const SEQ_PREFIX = '{"seq":0,';

/**
 * The row of `entry` under `localSeq`, stamped now. Throws the TypeError of `renderEntry` for a
 * bad entry (nothing is kept).
 */
export function rowOf(entry: unknown, localSeq: number): Row {
  const at = Date.now();
  const rendered = renderEntry(entry, 0, at);
  const line = rendered.line;
  const status = rendered.type === 'status' ? String(rendered.status) : null;
  return {
    localSeq, sessionId: rendered.sessionId, turnId: rendered.turnId, type: rendered.type, status,
    at,
    body: `{${line.slice(SEQ_PREFIX.length, -1)}`,
  };
}

/** The entry of a stored row: its body with `seq` put back first, as in the file ledger's lines. */
export function entryOf(row: { seq: string | number; body: string }): LedgerEntry {
  return JSON.parse(`{"seq":${Number(row.seq)},${row.body.slice(1)}`) as LedgerEntry;
}
