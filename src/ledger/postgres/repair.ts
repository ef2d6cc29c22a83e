/**
 * Closing a turn whose owner is gone: the file ledger's `closingEntries` (a `tool_aborted` for
 * each call without an output, then `interrupted`, or the marker and `cancelled` where a stop's
 * intent was recorded), written in one transaction that holds only if the turn is still open and
 * unchanged since it was read (`append_entries` with an expected last `seq`). A turn that moved
 * on meanwhile (its owner was alive after all and wrote) is read again; one that ended is left.
 */

import { closingEntries } from '../entry.js';
import { idColumn, idOfColumn } from './id-column.js';
import { withClient, type PgPool } from './pool.js';
import { entryOf, rowOf } from './rows.js';
import type { Appender } from './appender.js';
import type { Statements } from './statements.js';

/** What a repair needs of its ledger. */
export interface RepairContext {
  pool: PgPool;
  statements: Statements;
  appender: Appender;
  timeoutMs: number;
  /** The next local seq of the ledger's writer. */
  nextLocalSeq(): number;
}

/** How many times a turn that changed under the repair is read again. */
const READS = 5;
/** How long a repair whose session was busy waits before it reads again, in ms (it goes on while time is left). */
const BUSY_RETRY_MS = 5;

/**
 * Closes turn `turnId` of `sessionId` if it is open, within `timeoutMs`; `reason` is the one of its
 * `interrupted` (a turn with a recorded stop ends `cancelled` with the stop's own). Resolves true
 * when this call closed it, false when it is unknown, of another session, or already ended.
 */
export async function closeTurn(context: RepairContext, where: string, sessionId: string, turnId: string, reason: string): Promise<boolean> {
  const deadline = performance.now() + context.timeoutMs;
  const left = () => Math.max(1, Math.ceil(deadline - performance.now()));
  for (let read = 1; read <= READS && performance.now() < deadline;) {
    const state = await withClient(context.pool, where, left(), async (query) => {
      const [turn] = await query(context.statements.turn, [idColumn(turnId)]);
      if (turn === undefined || turn.session_id !== idColumn(sessionId) || turn.end_seq !== null) return undefined;
      return { lastSeq: String(turn.last_seq), entries: (await query(context.statements.turnEntries, [idColumn(turnId)])).map(entryOf) };
    });
    if (state === undefined) return false;
    const closing = closingEntries(state.entries, reason);
    if (closing.length === 0) return false;
    const rows = closing.map((entry) => rowOf(entry, context.nextLocalSeq()));
    const verdicts = await context.appender.send(rows, left(), { turnId, lastSeq: state.lastSeq });
    if (verdicts.every((v) => v === 'ok')) return true;
    // The session's lock is held elsewhere a moment (an append of it under way): read and try again.
    if (verdicts.includes('busy')) {
      await new Promise((resolve) => setTimeout(resolve, BUSY_RETRY_MS));
      continue;
    }
    if (!verdicts.includes('stale')) return false;
    read++;
  }
  return false;
}

/** The open turns `owner` started, oldest first. */
export async function openTurnsOf(context: RepairContext, where: string, owner: string): Promise<{ sessionId: string; turnId: string }[]> {
  const rows = await withClient(context.pool, where, context.timeoutMs, (query) => query(context.statements.openTurnsOf, [idColumn(owner)]));
  return rows.map((row) => ({ sessionId: idOfColumn(String(row.session_id)), turnId: idOfColumn(String(row.turn_id)) }));
}
