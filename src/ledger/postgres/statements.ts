/**
 * Every SQL statement `PgLedger` sends, built once from one schema name. The name is checked to be
 * a plain identifier (letters, digits, `_`) and always written quoted; no value is ever spliced
 * into SQL: values are always parameters (`$1`, …).
 *
 * The tables (docs/postgres.md shows them):
 * - `entries`: one row an entry; `seq` its number (below), `body` the entry as JSON without its
 *   `seq` (the row's column), `(writer, local_seq)` names the append that wrote it, so a re-sent
 *   transaction whose first answer was lost writes nothing twice.
 * - `turns`: one row a turn: its session, the instance that started it (`owner`), the `seq` of its
 *   last entry, whether a stop's intent was recorded, and its end (`end_seq`, `status`).
 * - `meta`: the schema's `version` and `seq_offset` (migrations.ts); `append_entries` carries the
 *   offset as a constant, written in at upgrade (it never changes once recorded).
 *
 * `append_entries` (its SQL: append-entries.ts) is the one decision that writes: a single
 * statement (one round trip, so no lock is ever held while the database waits on a client). Its
 * invariants:
 * 1. No wait on another session. It first tries the advisory lock of each distinct session of the
 *    batch (a 64-bit key a session), in key order, before anything gives the transaction an xid;
 *    a session whose lock another transaction holds is `busy`: none of its rows is written, the
 *    caller sends them again. Its turns rows are then locked `SKIP LOCKED`: a row someone else
 *    holds (a user's `SELECT … FOR UPDATE`, a long `DELETE`) makes its session `busy` too. Every
 *    other wait (a conflicting insert) ends at `p_lock_ms` (`lock_timeout`), before the client
 *    gives up, so nothing the client was told failed commits later.
 * 2. `seq = (xid << SEQ_SHIFT) + seq_offset + i`, `i` the row's place in the batch (1-based, below
 *    2^SEQ_SHIFT). A later transaction of a session waited for the session's lock, so it got its
 *    xid after the earlier one committed: within a session `seq` order is commit order. Every
 *    transaction still in progress has xid ≥ its reader snapshot's xmin, so a reader that reads
 *    only `seq < horizon` (`(xmin << SEQ_SHIFT) + seq_offset`) never misses a row that commits later.
 * 3. A row's fate is its own: one verdict a row, in order — `ok`, `used` (a `turn_started` of a known
 *    turn), `ended` (its turn's end is recorded, before the batch or earlier in it), `session` (its
 *    turn is another session's), `owner` (its turn is another instance's; a repair excepted),
 *    `stale` (a repair whose expected state moved) or `busy` (send again). A session with a busy
 *    row writes none of its rows, so a session's rows keep their order.
 * 4. Skips the rows of this writer already written (a re-sent transaction, `p_resent`: the
 *    caller says when a row may have been written by an attempt whose answer was lost): each is `ok`.
 */

import { createHash } from 'node:crypto';
import { describe } from '../../errors.js';
import { appendEntriesFunction, appendSetFunction, SEQ_SHIFT } from './append-entries.js';

export { MAX_BATCH_ROWS, SEQ_SHIFT } from './append-entries.js';
/** The schema version this release writes (`meta.version`): 3 bakes `seq_offset` into `append_entries`. */
export const SCHEMA_VERSION = 3;

/** A schema name `PgLedger` accepts: an unquoted-style identifier, at most 63 bytes (Postgres' limit). */
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * The bodies of a batch as `append`'s `$9`: joined by a newline, which none holds (a body is
 * `JSON.stringify` output, which escapes every control character: rows.ts). One join instead of
 * node-postgres escaping each body into an array literal: a stop storm's 4,000 bodies cost ~5 ms
 * of escaping on the stop's path, the join ~0.4 ms.
 */
export function joinBodies(bodies: readonly string[]): string {
  return bodies.join('\n');
}

/** Throws a TypeError/RangeError naming `name` unless `value` is a schema name `PgLedger` accepts. */
export function checkSchemaName(name: string, value: unknown): asserts value is string {
  if (typeof value !== 'string') throw new TypeError(`${name}: expected a schema name (a string), got ${describe(value)}`);
  if (!SCHEMA_NAME.test(value)) {
    throw new RangeError(`${name}: expected letters, digits and _ (not starting with a digit), at most 63 characters, got ${describe(value)}`);
  }
}

/** The SQL of one schema. */
export interface Statements {
  /** The schema, quoted. */
  readonly schema: string;
  /** The tables and indexes, statement by statement (each idempotent): run only on a schema without `entries`. */
  readonly tables: readonly string[];
  /**
   * `meta` and the functions, statement by statement, numbering with `seqOffset` (the schema's
   * `seq_offset`: `recordedOffset`'s, or `newOffset`'s for a schema that has none): run when the
   * recorded version is below `SCHEMA_VERSION`.
   */
  upgrade(seqOffset: bigint): readonly string[];
  /** The `seq_offset` recorded in `meta` (no row: a schema of the first release); needs `meta`. */
  readonly recordedOffset: string;
  /** The `seq_offset` of a schema that has none: above every seq it holds (`offset`, text). */
  readonly newOffset: string;
  /** `$1`: the schema's `seq_offset` for a schema written before (its highest seq); sets `meta`. */
  readonly recordVersion: string;
  /** The recorded version (fails when `meta` is missing: a schema of the first release, or none). */
  readonly version: string;
  /** Whether `entries` exists (a schema of any release). */
  readonly hasTables: string;
  /** `$1`: the key of the migration lock (a transaction-level advisory lock). */
  readonly migrationLock: string;
  /**
   * `append_entries(owner, writer, local_seq[], session_id[], turn_id[], type[], status[], at[], body[], expect_turn, expect_last, lock_ms, resent)`;
   * `$9`, the bodies, is one text, the bodies joined by `\n` (`joinBodies`): split by the server, not escaped one by one
   * into an array literal by the client.
   */
  readonly append: string;
  /** The name `append` is prepared under (one a schema and release: a hash of its text). */
  readonly appendName: string;
  /** `$1`: turn id → its `session_id`, `last_seq`, `end_seq`. */
  readonly turn: string;
  /** `$1`: owner → the turns it started that have no end. */
  readonly openTurnsOf: string;
  /** The entries of one turn (`$1`), in order. */
  readonly turnEntries: string;
  /**
   * The `select` of `entries()` for a filter with these fields given (values are parameters).
   * `horizon`: read only below the safe horizon (invariant 2), for paging across sessions.
   */
  selectEntries(given: { sessionId: boolean; turnId: boolean; afterSeq: boolean; limit: boolean; horizon: boolean }): { text: string; order: string[] };
}

/** The statements of `schemaName` (already checked by `checkSchemaName`). */
export function statementsFor(schemaName: string): Statements {
  const s = `"${schemaName}"`;
  const tables = [
    `CREATE SCHEMA IF NOT EXISTS ${s}`,
    `CREATE TABLE IF NOT EXISTS ${s}.entries (
      seq bigint PRIMARY KEY,
      session_id text NOT NULL,
      turn_id text NOT NULL,
      type text NOT NULL,
      at bigint NOT NULL,
      body json NOT NULL,
      writer text NOT NULL,
      local_seq bigint NOT NULL,
      CONSTRAINT entries_written_once UNIQUE (writer, local_seq)
    )`,
    `CREATE INDEX IF NOT EXISTS entries_by_session ON ${s}.entries (session_id, seq)`,
    `CREATE INDEX IF NOT EXISTS entries_by_turn ON ${s}.entries (turn_id, seq)`,
    `CREATE TABLE IF NOT EXISTS ${s}.turns (
      turn_id text PRIMARY KEY,
      session_id text NOT NULL,
      owner text NOT NULL,
      last_seq bigint NOT NULL,
      cancelling boolean NOT NULL DEFAULT false,
      end_seq bigint,
      status text
    )`,
    `CREATE INDEX IF NOT EXISTS turns_open_by_owner ON ${s}.turns (owner) WHERE end_seq IS NULL`,
  ];
  const upgrade = (seqOffset: bigint) => [
    `CREATE TABLE IF NOT EXISTS ${s}.meta (key text PRIMARY KEY, value bigint NOT NULL)`,
    // The first release's function (11 arguments) goes: an instance still running it fails loudly instead of numbering apart.
    `DROP FUNCTION IF EXISTS ${s}.append_entries(text, text, bigint[], text[], text[], text[], text[], bigint[], text[], text, bigint)`,
    appendSetFunction(s),
    appendEntriesFunction(s, schemaName, seqOffset),
  ];
  const horizon = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << ${SEQ_SHIFT}) + coalesce((SELECT value FROM ${s}.meta WHERE key = 'seq_offset'), 0)`;
  const append = `SELECT ${s}.append_entries($1, $2, $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], string_to_array($9, chr(10)), $10, $11, $12, $13) AS verdicts`;
  return {
    schema: s,
    tables,
    upgrade,
    recordVersion: `INSERT INTO ${s}.meta (key, value) VALUES ('version', ${SCHEMA_VERSION}), ('seq_offset', $1::bigint)
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    version: `SELECT value FROM ${s}.meta WHERE key = 'version'`,
    recordedOffset: `SELECT value::text AS offset FROM ${s}.meta WHERE key = 'seq_offset'`,
    // Above every seq a first-release schema holds: new ones are (xid << SEQ_SHIFT) + offset + i, xid above this one's.
    newOffset: `SELECT greatest(0, coalesce(max(seq), 0) + 1 - (pg_current_xact_id()::text::bigint << ${SEQ_SHIFT}))::text AS offset FROM ${s}.entries`,
    hasTables: `SELECT to_regclass('${s}.entries') IS NOT NULL AS present`,
    migrationLock: 'SELECT pg_advisory_xact_lock(hashtext($1))',
    append,
    appendName: `fullstop_append_${createHash('sha256').update(append).digest('hex').slice(0, 16)}`,
    turn: `SELECT session_id, last_seq, end_seq FROM ${s}.turns WHERE turn_id = $1`,
    openTurnsOf: `SELECT session_id, turn_id FROM ${s}.turns WHERE owner = $1 AND end_seq IS NULL ORDER BY last_seq`,
    turnEntries: `SELECT seq, body::text AS body FROM ${s}.entries WHERE turn_id = $1 ORDER BY seq`,
    selectEntries(given) {
      const where: string[] = [];
      const order: string[] = [];
      const param = (field: string, sql: (n: number) => string) => { order.push(field); where.push(sql(order.length)); };
      if (given.sessionId) param('sessionId', (n) => `session_id = $${n}`);
      if (given.turnId) param('turnId', (n) => `turn_id = $${n}`);
      if (given.afterSeq) param('afterSeq', (n) => `seq > $${n}`);
      if (given.horizon) where.push(`seq < ${horizon}`);
      let text = `SELECT seq, body::text AS body FROM ${s}.entries${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY seq`;
      if (given.limit) {
        order.push('limit');
        text += ` LIMIT $${order.length}`;
      }
      return { text, order };
    },
  };
}
