/**
 * Every SQL statement `PgLedger` sends, built once from one schema name. The name is checked to be
 * a plain identifier (letters, digits, `_`) and always written quoted; no value is ever spliced
 * into SQL: values are always parameters (`$1`, …).
 *
 * The tables (docs/postgres.md shows them):
 * - `entries`: one row an entry; `seq` is the global order, `body` the entry as JSON without its
 *   `seq` (the row's column), `(writer, local_seq)` names the append that wrote it, so a re-sent
 *   transaction whose first answer was lost writes nothing twice.
 * - `turns`: one row a turn: its session, the instance that started it (`owner`), the `seq` of its
 *   last entry, whether a stop's intent was recorded, and its end (`end_seq`, `status`).
 *
 * `append_entries` is the one decision that writes: a single statement (one round trip, so no
 * lock is ever held while the database waits on a client), which, in its own transaction:
 * 1. takes the schema's append lock, so appending transactions run one at a time across every
 *    instance and `seq` order is commit order (a reader paging with `afterSeq` never skips an
 *    entry that commits late);
 * 2. skips the rows of this writer already written (a re-sent transaction);
 * 3. refuses a `turn_started` of a turn already known (`used`) and any entry of a turn whose end
 *    is recorded, before the batch or earlier in it (`ended`);
 * 4. numbers the accepted rows after the highest `seq` and inserts them, and records each turn's
 *    last `seq`, intent and end;
 * 5. with an expected turn state (a repair), writes nothing (`stale`) unless the turn is still
 *    open with that last `seq`.
 * It returns one verdict a row, in order: `ok`, `used`, `ended` or `stale`. A small batch (a stop's
 * intent, its history) is written row by row, which costs about half the set statement's
 * execution; a large one (a storm) as one set statement.
 */

import { TERMINAL_STATUSES } from '../../constants.js';
import { describe } from '../../errors.js';

/** Batches up to this many rows are written row by row, larger ones as one set (both decide alike). */
const SMALL_BATCH = 16;

/** A schema name `PgLedger` accepts: an unquoted-style identifier, at most 63 bytes (Postgres' limit). */
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

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
  /** The migration, statement by statement (each idempotent). */
  readonly migration: readonly string[];
  /** `$1`: the key of the migration lock (a transaction-level advisory lock). */
  readonly migrationLock: string;
  /** `append_entries(owner, writer, local_seq[], session_id[], turn_id[], type[], status[], at[], body[], expect_turn, expect_last)`. */
  readonly append: string;
  /** `$1`: turn id → its `session_id`, `last_seq`, `end_seq`. */
  readonly turn: string;
  /** `$1`: owner → the turns it started that have no end. */
  readonly openTurnsOf: string;
  /** The entries of one turn (`$1`), in order. */
  readonly turnEntries: string;
  /** The `select` of `entries()` for a filter with these fields given (values are parameters). */
  selectEntries(given: { sessionId: boolean; turnId: boolean; afterSeq: boolean; limit: boolean }): { text: string; order: string[] };
}

/** The statements of `schemaName` (already checked by `checkSchemaName`). */
export function statementsFor(schemaName: string): Statements {
  const s = `"${schemaName}"`;
  const terminal = `ARRAY[${TERMINAL_STATUSES.map((t) => `'${t}'`).join(', ')}]`;
  const migration = [
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
    // The append lock's key is the entries table's oid: one lock a schema, no value spliced in.
    `CREATE OR REPLACE FUNCTION ${s}.append_entries(
      p_owner text, p_writer text, p_local bigint[], p_session text[], p_turn text[], p_type text[],
      p_status text[], p_at bigint[], p_body text[], p_expect_turn text, p_expect_last bigint)
    RETURNS text[] LANGUAGE plpgsql AS $fn$
    DECLARE
      verdicts text[] := '{}';
      top bigint;
      ended boolean;
      terminal boolean;
    BEGIN
      PERFORM pg_advisory_xact_lock(x'66756c6c'::bigint << 32 | '${s}.entries'::regclass::oid::bigint);
      IF p_expect_turn IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM ${s}.entries WHERE writer = p_writer AND local_seq = p_local[1])
        AND NOT EXISTS (SELECT 1 FROM ${s}.turns
                        WHERE turn_id = p_expect_turn AND end_seq IS NULL AND last_seq = p_expect_last) THEN
        RETURN array_fill('stale'::text, ARRAY[cardinality(p_local)]);
      END IF;
      IF cardinality(p_local) <= ${SMALL_BATCH} THEN
        -- A few rows (a stop's intent, its history): row by row costs less than planning the set.
        -- Each row sees the ones before it, so an end or a start earlier in the batch counts.
        SELECT coalesce(max(seq), 0) INTO top FROM ${s}.entries;
        FOR i IN 1..cardinality(p_local) LOOP
          IF EXISTS (SELECT 1 FROM ${s}.entries WHERE writer = p_writer AND local_seq = p_local[i]) THEN
            verdicts := verdicts || 'ok'::text;
            CONTINUE;
          END IF;
          SELECT end_seq IS NOT NULL INTO ended FROM ${s}.turns WHERE turn_id = p_turn[i];
          IF FOUND AND p_type[i] = 'turn_started' THEN verdicts := verdicts || 'used'::text; CONTINUE; END IF;
          IF FOUND AND ended THEN verdicts := verdicts || 'ended'::text; CONTINUE; END IF;
          top := top + 1;
          terminal := coalesce(p_status[i] = ANY(${terminal}), false);
          INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
            VALUES (top, p_session[i], p_turn[i], p_type[i], p_at[i], p_body[i]::json, p_writer, p_local[i]);
          INSERT INTO ${s}.turns AS t (turn_id, session_id, owner, last_seq, cancelling, end_seq, status)
            VALUES (p_turn[i], p_session[i], p_owner, top, coalesce(p_status[i] = 'cancelling', false),
                    CASE WHEN terminal THEN top END, CASE WHEN terminal THEN p_status[i] END)
            ON CONFLICT (turn_id) DO UPDATE SET
              last_seq = excluded.last_seq,
              cancelling = t.cancelling OR excluded.cancelling,
              end_seq = coalesce(t.end_seq, excluded.end_seq),
              status = coalesce(t.status, excluded.status);
          verdicts := verdicts || 'ok'::text;
        END LOOP;
        RETURN verdicts;
      END IF;
      WITH input AS (
        SELECT * FROM unnest(p_local, p_session, p_turn, p_type, p_status, p_at, p_body)
          WITH ORDINALITY AS i(local_seq, session_id, turn_id, type, status, at, body, ord)
      ), judged AS (
        SELECT i.*, CASE
          WHEN EXISTS (SELECT 1 FROM ${s}.entries e WHERE e.writer = p_writer AND e.local_seq = i.local_seq) THEN 'written'
          WHEN i.type = 'turn_started' AND (t.turn_id IS NOT NULL
            OR count(*) FILTER (WHERE i.type = 'turn_started') OVER earlier > 0) THEN 'used'
          WHEN t.end_seq IS NOT NULL
            OR coalesce(bool_or(i.status = ANY(${terminal})) OVER earlier, false) THEN 'ended'
          ELSE 'ok' END AS verdict
        FROM input i LEFT JOIN ${s}.turns t ON t.turn_id = i.turn_id
        WINDOW earlier AS (PARTITION BY i.turn_id ORDER BY i.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
      ), accepted AS (
        SELECT j.*, top.seq + row_number() OVER (ORDER BY j.ord) AS seq
        FROM judged j, (SELECT coalesce(max(seq), 0) AS seq FROM ${s}.entries) top
        WHERE j.verdict = 'ok'
      ), inserted AS (
        INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
        SELECT seq, session_id, turn_id, type, at, body::json, p_writer, local_seq FROM accepted
      ), turned AS (
        INSERT INTO ${s}.turns AS t (turn_id, session_id, owner, last_seq, cancelling, end_seq, status)
        SELECT turn_id, (array_agg(session_id ORDER BY ord))[1], p_owner, max(seq),
          coalesce(bool_or(status = 'cancelling'), false),
          min(seq) FILTER (WHERE status = ANY(${terminal})),
          (array_agg(status ORDER BY ord) FILTER (WHERE status = ANY(${terminal})))[1]
        FROM accepted GROUP BY turn_id
        ON CONFLICT (turn_id) DO UPDATE SET
          last_seq = excluded.last_seq,
          cancelling = t.cancelling OR excluded.cancelling,
          end_seq = coalesce(t.end_seq, excluded.end_seq),
          status = coalesce(t.status, excluded.status)
      )
      SELECT array_agg(CASE verdict WHEN 'written' THEN 'ok' ELSE verdict END ORDER BY ord) INTO verdicts FROM judged;
      RETURN verdicts;
    END
    $fn$`,
  ];
  return {
    schema: s,
    migration,
    migrationLock: 'SELECT pg_advisory_xact_lock(hashtext($1))',
    append: `SELECT ${s}.append_entries($1, $2, $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10, $11) AS verdicts`,
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
      let text = `SELECT seq, body::text AS body FROM ${s}.entries${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY seq`;
      if (given.limit) {
        order.push('limit');
        text += ` LIMIT $${order.length}`;
      }
      return { text, order };
    },
  };
}
