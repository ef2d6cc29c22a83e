/**
 * An entry as a row and back. The entry is checked and rendered by the file ledger's own
 * `renderEntry`, so a `PgLedger` keeps exactly the file ledger's entry objects; the row's `body`
 * is that JSON without its `seq`, which is the row's own column (the database assigns it).
 */

import { LEDGER_MAX_LINE_BYTES } from '../../constants.js';
import { renderEntry, turnEntryTail, turnIdsJson, type LedgerEntry, type TurnEntryBody } from '../entry.js';
import type { Row } from './appender.js';
import { idColumn } from './id-column.js';
import { utf8Bytes } from '../../base/head-tail.js';

/**
 * The most UTF-8 bytes an id may take in its column (escaped: id-column.ts). PostgreSQL refuses an
 * index row over 2,704 bytes (a third of a page), and every id column is indexed; checked before
 * a row is queued, so such an id never fails the rows it would share a transaction with.
 */
export const MAX_PG_ID_BYTES = 2000;

/** Throws a RangeError naming `name` when `id` (an id `checkId` took) is over `MAX_PG_ID_BYTES` in its column. */
export function checkIdBytes(name: string, id: string): void {
  const bytes = utf8Bytes(idColumn(id));
  if (bytes > MAX_PG_ID_BYTES) {
    throw new RangeError(`${name}: at most ${MAX_PG_ID_BYTES} bytes in UTF-8 on PostgreSQL (its index rows are bounded), got ${bytes} bytes`);
  }
}

/** What `renderEntry` writes before the rest of the line when given seq 0. */
const SEQ_PREFIX = '{"seq":0,';

/**
 * The row of `entry` under `localSeq`, stamped now. Throws the TypeError of `renderEntry` for a
 * bad entry (nothing is kept).
 */
export function rowOf(entry: unknown, localSeq: number, where = 'PgLedger.append'): Row {
  const at = Date.now();
  const rendered = renderEntry(entry, 0, at);
  const line = rendered.line;
  const status = rendered.type === 'status' ? String(rendered.status) : null;
  checkIdBytes(`${where}: entry.sessionId`, rendered.sessionId);
  checkIdBytes(`${where}: entry.turnId`, rendered.turnId);
  const body = `{${line.slice(SEQ_PREFIX.length, -1)}`;
  const bodyBytes = utf8Bytes(body);
  if (bodyBytes > LEDGER_MAX_LINE_BYTES) throw tooBig(where, bodyBytes);
  return {
    localSeq, sessionId: rendered.sessionId, turnId: rendered.turnId, type: rendered.type, status,
    at, body, bytes: bodyBytes + utf8Bytes(rendered.sessionId) + utf8Bytes(rendered.turnId),
  };
}

/** A runner's turn as its rows need it: its ids checked and encoded once (`turnOf`). */
export interface RowTurn {
  readonly sessionId: string;
  readonly turnId: string;
  /** `"sessionId":…,"turnId":…,` (`turnIdsJson`). */
  readonly idsJson: string;
  /** UTF-8 bytes of the two ids. */
  readonly idBytes: number;
  /** UTF-8 bytes of `idsJson`. */
  readonly idsJsonBytes: number;
}

/** The `RowTurn` of `sessionId`/`turnId`; throws the TypeError/RangeError `rowOf` would for a bad id. */
export function turnOf(sessionId: string, turnId: string, where = 'PgLedger.append'): RowTurn {
  const idsJson = turnIdsJson(sessionId, turnId);
  checkIdBytes(`${where}: entry.sessionId`, sessionId);
  checkIdBytes(`${where}: entry.turnId`, turnId);
  return { sessionId, turnId, idsJson, idBytes: utf8Bytes(sessionId) + utf8Bytes(turnId), idsJsonBytes: utf8Bytes(idsJson) };
}

/**
 * The row `rowOf` makes of `{ sessionId, turnId, ...body }`, byte for byte, for a body the runner
 * built (`renderTurnEntry` says what it must be): the ids are not checked or encoded again, and
 * no copy of the entry is made. Throws as `rowOf` for a bad field or an entry too big.
 */
export function turnRowOf(turn: RowTurn, body: TurnEntryBody, localSeq: number, where = 'PgLedger.append'): Row {
  const at = Date.now();
  const tail = turnEntryTail(body);
  const head = `{"at":${at},`;
  // Counted by its parts: the whole, a concatenation, would be copied flat only to be measured.
  const bodyBytes = head.length + turn.idsJsonBytes + utf8Bytes(tail);
  const text = `${head}${turn.idsJson}${tail}`;
  if (bodyBytes > LEDGER_MAX_LINE_BYTES) throw tooBig(where, bodyBytes);
  return {
    localSeq, sessionId: turn.sessionId, turnId: turn.turnId, type: body.type, status: body.type === 'status' ? body.status : null,
    at, body: text, bytes: bodyBytes + turn.idBytes,
  };
}

function tooBig(where: string, bytes: number): RangeError {
  return new RangeError(`${where}: the entry is ${bytes} bytes as JSON, over the ${LEDGER_MAX_LINE_BYTES} an entry may hold ` +
    '(LEDGER_MAX_LINE_BYTES, as the file Ledger); record a large output as a file and its path');
}

/** The entry of a stored row: its body with `seq` put back first, as in the file ledger's lines. */
export function entryOf(row: { seq: string | number; body: string }): LedgerEntry {
  return JSON.parse(`{"seq":${Number(row.seq)},${row.body.slice(1)}`) as LedgerEntry;
}
