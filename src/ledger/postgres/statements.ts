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
/**
 * The schema version this release writes (`meta.version`): 3 bakes `seq_offset` into `append_entries`;
 * 4 byte-compared ids and a `turns` with room for its updates (new schemas), the locks taken in one statement.
 */
export const SCHEMA_VERSION = 4;

/** The fillfactor of `turns` (percent of a page filled by inserts): room for its rows' updates. */
const TURNS_FILLFACTOR = 50;

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

/**
 * A batch's numbers (`local_seq`, `at`: safe integers) as `append`'s `$3` and `$8`: joined by commas,
 * split and cast by the server (node-postgres would quote each one into an array literal).
 */
export function joinNumbers(numbers: readonly number[]): string {
  return numbers.join(',');
}

/**
 * A batch's ids (in their column form), types or statuses as `append`'s `$4`–`$7`: joined by a
 * newline, `null` (a status of another type) as `-` (no type or status is `-`). `undefined` when
 * a value holds a newline (an id may hold any character but NUL): then `joinAsJson` sends them all.
 */
export function joinTexts(values: readonly (string | null)[]): string | undefined {
  for (const value of values) if (value !== null && value.includes('\n')) return undefined;
  return values.map((value) => value ?? NULL_TEXT).join('\n');
}

/** What `joinTexts` writes for `null`. */
const NULL_TEXT = '-';

/** `values` as a JSON array: `append`'s `$4`–`$7` for a batch that `joinTexts` cannot join (`$14` true). */
export function joinAsJson(values: readonly (string | null)[]): string {
  return JSON.stringify(values);
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
   * `append_entries(owner, writer, local_seq[], session_id[], turn_id[], type[], status[], at[], body[], expect_turn, expect_last, lock_ms, resent)`,
   * each array sent as one text the server splits (node-postgres would escape each element into an array literal):
   * `$3`, `$8` by `joinNumbers`, `$4`–`$7` by `joinTexts` (or `joinAsJson`, `$14` true), `$9` by `joinBodies`.
   * Its one column, `verdicts`, is NULL when every row is `ok`, else one verdict a row.
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
  // Ids are compared as bytes (`COLLATE "C"`): they are only ever matched, never ordered, and a
  // locale's collation (C.UTF-8 is not memcmp) costs every index insert and lookup of a storm.
  // `turns` leaves half of each page free: every accepted row updates its turn, and a page with
  // room keeps the new version beside the old (a HOT update: no index entry written).
  const tables = [
    `CREATE SCHEMA IF NOT EXISTS ${s}`,
    `CREATE TABLE IF NOT EXISTS ${s}.entries (
      seq bigint PRIMARY KEY,
      session_id text COLLATE "C" NOT NULL,
      turn_id text COLLATE "C" NOT NULL,
      type text NOT NULL,
      at bigint NOT NULL,
      body json NOT NULL,
      writer text COLLATE "C" NOT NULL,
      local_seq bigint NOT NULL,
      CONSTRAINT entries_written_once UNIQUE (writer, local_seq)
    )`,
    `CREATE INDEX IF NOT EXISTS entries_by_session ON ${s}.entries (session_id, seq)`,
    `CREATE INDEX IF NOT EXISTS entries_by_turn ON ${s}.entries (turn_id, seq)`,
    `CREATE TABLE IF NOT EXISTS ${s}.turns (
      turn_id text COLLATE "C" PRIMARY KEY,
      session_id text COLLATE "C" NOT NULL,
      owner text COLLATE "C" NOT NULL,
      last_seq bigint NOT NULL,
      cancelling boolean NOT NULL DEFAULT false,
      end_seq bigint,
      status text
    ) WITH (fillfactor = ${TURNS_FILLFACTOR})`,
    `CREATE INDEX IF NOT EXISTS turns_open_by_owner ON ${s}.turns (owner) WHERE end_seq IS NULL`,
  ];
  const upgrade = (seqOffset: bigint) => [
    `CREATE TABLE IF NOT EXISTS ${s}.meta (key text PRIMARY KEY, value bigint NOT NULL)`,
    // The first release's function (11 arguments) goes: an instance still running it fails loudly instead of numbering apart.
    `DROP FUNCTION IF EXISTS ${s}.append_entries(text, text, bigint[], text[], text[], text[], text[], bigint[], text[], text, bigint)`,
    appendSetFunction(s),
    appendEntriesFunction(s, schemaName, seqOffset),
    // An older schema's turns leave room too (for pages written from now on). Its lock, SHARE UPDATE
    // EXCLUSIVE, conflicts with no append's; held elsewhere (a manual VACUUM) past the migration's
    // lock_timeout, the setting is skipped rather than failing open.
    `DO $do$ BEGIN
      ALTER TABLE ${s}.turns SET (fillfactor = ${TURNS_FILLFACTOR});
    EXCEPTION WHEN lock_not_available THEN NULL;
    END $do$`,
  ];
  const horizon = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << ${SEQ_SHIFT}) + coalesce((SELECT value FROM ${s}.meta WHERE key = 'seq_offset'), 0)`;
  // $4–$7: newline-joined (`joinTexts`; only a status may be null), or JSON arrays when $14 (`joinAsJson`), split in order.
  const texts = (n: number, nulls = '') => `CASE WHEN $14::boolean
    THEN ARRAY(SELECT j.v FROM json_array_elements_text($${n}::text::json) WITH ORDINALITY AS j(v, o) ORDER BY j.o)
    ELSE string_to_array($${n}::text, chr(10)${nulls}) END`;
  // The answer is NULL when every verdict is ok (a storm's thousands of 'ok' are not sent back and parsed).
  const append = `SELECT CASE WHEN 'ok' = ALL(v) THEN NULL ELSE v END AS verdicts FROM ${s}.append_entries($1, $2,
    string_to_array($3, ',')::bigint[], ${texts(4)}, ${texts(5)}, ${texts(6)}, ${texts(7, `, '${NULL_TEXT}'`)}, string_to_array($8, ',')::bigint[],
    string_to_array($9, chr(10)), $10, $11, $12, $13) AS v`;
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
