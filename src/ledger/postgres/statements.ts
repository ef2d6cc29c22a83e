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
 * - `meta`: the schema's `version` and `seq_offset` (migrations.ts).
 *
 * `append_entries` is the one decision that writes: a single statement (one round trip, so no
 * lock is ever held while the database waits on a client). Its invariants:
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

import { TERMINAL_STATUSES } from '../../constants.js';
import { describe } from '../../errors.js';

/** `seq`'s low bits: a row's place in its batch (invariant 2). */
export const SEQ_SHIFT = 12;
/** The most rows one call of `append_entries` takes (below 2^SEQ_SHIFT). */
export const MAX_BATCH_ROWS = 4000;
/** Batches up to this many rows are written row by row, larger ones as one set (both decide alike). */
const SMALL_BATCH = 16;
/** The schema version this release writes (`meta.version`). */
export const SCHEMA_VERSION = 2;

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
  /** `meta` and the function, statement by statement: run when the recorded version is below `SCHEMA_VERSION`. */
  readonly upgrade: readonly string[];
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
  const terminal = `ARRAY[${TERMINAL_STATUSES.map((t) => `'${t}'`).join(', ')}]`;
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
  // The session lock's key: the schema and the session, hashed to 64 bits (a collision only makes two sessions take turns).
  const sessionKey = (expr: string) => `hashtextextended('${schemaName}:' || ${expr}, 0)`;
  const upgrade = [
    `CREATE TABLE IF NOT EXISTS ${s}.meta (key text PRIMARY KEY, value bigint NOT NULL)`,
    // The first release's function (11 arguments) goes: an instance still running it fails loudly instead of numbering apart.
    `DROP FUNCTION IF EXISTS ${s}.append_entries(text, text, bigint[], text[], text[], text[], text[], bigint[], text[], text, bigint)`,
    `CREATE OR REPLACE FUNCTION ${s}.append_entries(
      p_owner text, p_writer text, p_local bigint[], p_session text[], p_turn text[], p_type text[],
      p_status text[], p_at bigint[], p_body text[], p_expect_turn text, p_expect_last bigint, p_lock_ms integer, p_resent boolean)
    RETURNS text[] LANGUAGE plpgsql AS $fn$
    DECLARE
      verdicts text[];
      busy text[] := '{}';
      locked text[];
      sess text;
      k bigint;
      base bigint;
      turn record;
      mine text[] := '{}';
      terminal boolean;
    BEGIN
      IF cardinality(p_local) > ${MAX_BATCH_ROWS} THEN
        RAISE EXCEPTION 'append_entries: % rows, at most ${MAX_BATCH_ROWS} a call', cardinality(p_local) USING ERRCODE = '54000';
      END IF;
      -- 1. Every lock wait of this transaction ends before the client gives up.
      PERFORM set_config('lock_timeout', greatest(p_lock_ms, 1)::text, true);
      -- 1. The sessions' locks, in key order, before the transaction has an xid; one held elsewhere: busy.
      FOR sess, k IN SELECT d.s, ${sessionKey('d.s')} FROM (SELECT DISTINCT unnest(p_session) AS s) d ORDER BY 2 LOOP
        IF NOT pg_try_advisory_xact_lock(k) THEN busy := busy || sess; END IF;
      END LOOP;
      IF cardinality(busy) > 0 AND p_expect_turn IS NOT NULL THEN
        RETURN array_fill('busy'::text, ARRAY[cardinality(p_local)]);
      END IF;
      IF p_expect_turn IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM ${s}.entries WHERE writer = p_writer AND local_seq = p_local[1])
        AND NOT EXISTS (SELECT 1 FROM ${s}.turns
                        WHERE turn_id = p_expect_turn AND end_seq IS NULL AND last_seq = p_expect_last) THEN
        RETURN array_fill('stale'::text, ARRAY[cardinality(p_local)]);
      END IF;
      -- 2. The numbers: this transaction's xid (assigned here, after the session locks).
      base := (pg_current_xact_id()::text::bigint << ${SEQ_SHIFT}) + coalesce((SELECT value FROM ${s}.meta WHERE key = 'seq_offset'), 0);
      IF base >= (1::bigint << 53) - (1::bigint << ${SEQ_SHIFT}) THEN
        RAISE EXCEPTION 'append_entries: seq past 2^53 (xid %)', pg_current_xact_id() USING ERRCODE = '54000';
      END IF;
      -- 1. The rows' own turns, locked; one someone else holds makes its session busy.
      SELECT coalesce(array_agg(x.turn_id), '{}') INTO locked FROM (
        SELECT t.turn_id FROM ${s}.turns t
        WHERE (t.turn_id, t.session_id) IN (SELECT u.t, u.s FROM unnest(p_turn, p_session) AS u(t, s) WHERE NOT (u.s = ANY(busy)))
        FOR NO KEY UPDATE SKIP LOCKED) x;
      IF cardinality(p_local) <= ${SMALL_BATCH} THEN
        -- 3. A few rows (a stop's intent, its history): row by row costs less than the set below,
        -- and decides alike. A session with a turn held elsewhere waits whole.
        FOR i IN 1..cardinality(p_local) LOOP
          IF NOT (p_session[i] = ANY(busy)) AND EXISTS (SELECT 1 FROM ${s}.turns
              WHERE turn_id = p_turn[i] AND session_id = p_session[i] AND NOT (turn_id = ANY(locked))) THEN
            busy := busy || p_session[i];
          END IF;
        END LOOP;
        verdicts := '{}';
        FOR i IN 1..cardinality(p_local) LOOP
          IF p_session[i] = ANY(busy) THEN verdicts := verdicts || 'busy'::text; CONTINUE; END IF;
          IF p_resent AND EXISTS (SELECT 1 FROM ${s}.entries WHERE writer = p_writer AND local_seq = p_local[i]) THEN
            verdicts := verdicts || 'ok'::text;
            CONTINUE;
          END IF;
          terminal := coalesce(p_status[i] = ANY(${terminal}), false);
          SELECT * INTO turn FROM ${s}.turns WHERE turn_id = p_turn[i];
          IF FOUND THEN
            IF turn.session_id <> p_session[i] THEN verdicts := verdicts || 'session'::text; CONTINUE; END IF;
            IF turn.owner <> p_owner AND p_expect_turn IS NULL AND NOT (turn.turn_id = ANY(mine)) THEN
              verdicts := verdicts || 'owner'::text;
              CONTINUE;
            END IF;
            IF p_type[i] = 'turn_started' THEN verdicts := verdicts || 'used'::text; CONTINUE; END IF;
            IF turn.end_seq IS NOT NULL THEN verdicts := verdicts || 'ended'::text; CONTINUE; END IF;
            UPDATE ${s}.turns SET
              last_seq = base + i,
              cancelling = cancelling OR coalesce(p_status[i] = 'cancelling', false),
              end_seq = CASE WHEN terminal THEN base + i END,
              status = CASE WHEN terminal THEN p_status[i] END
            WHERE turn_id = p_turn[i];
          ELSE
            INSERT INTO ${s}.turns (turn_id, session_id, owner, last_seq, cancelling, end_seq, status)
              VALUES (p_turn[i], p_session[i], p_owner, base + i, coalesce(p_status[i] = 'cancelling', false),
                      CASE WHEN terminal THEN base + i END, CASE WHEN terminal THEN p_status[i] END)
              ON CONFLICT (turn_id) DO NOTHING;
            -- Another session's transaction inserted it meanwhile: judged again when sent again.
            IF NOT FOUND THEN verdicts := verdicts || 'busy'::text; CONTINUE; END IF;
            mine := mine || p_turn[i];
          END IF;
          INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
            VALUES (base + i, p_session[i], p_turn[i], p_type[i], p_at[i], p_body[i]::json, p_writer, p_local[i]);
          verdicts := verdicts || 'ok'::text;
        END LOOP;
        RETURN verdicts;
      END IF;
      -- 3. Judge every row, number and write the accepted ones, record each turn's last entry and end.
      WITH input AS (
        SELECT u.*, NOT (u.session_id = ANY(busy)) AS free
        FROM unnest(p_local, p_session, p_turn, p_type, p_status, p_at, p_body)
          WITH ORDINALITY AS u(local_seq, session_id, turn_id, type, status, at, body, ord)
      ), judged AS (
        SELECT i.*, t.turn_id IS NOT NULL AS known, CASE
          WHEN NOT i.free THEN 'busy'
          WHEN p_resent AND EXISTS (SELECT 1 FROM ${s}.entries e WHERE e.writer = p_writer AND e.local_seq = i.local_seq) THEN 'written'
          WHEN t.turn_id IS NOT NULL AND t.session_id <> i.session_id THEN 'session'
          WHEN t.turn_id IS NULL AND first_value(i.session_id) OVER turn_rows <> i.session_id THEN 'session'
          WHEN t.turn_id IS NOT NULL AND l.turn_id IS NULL THEN 'busy'
          WHEN t.turn_id IS NOT NULL AND t.owner <> p_owner AND p_expect_turn IS NULL THEN 'owner'
          WHEN i.type = 'turn_started' AND (t.turn_id IS NOT NULL
            OR count(*) FILTER (WHERE i.type = 'turn_started') OVER earlier > 0) THEN 'used'
          WHEN t.end_seq IS NOT NULL
            OR coalesce(bool_or(i.status = ANY(${terminal})) OVER earlier, false) THEN 'ended'
          ELSE 'ok' END AS verdict
        -- A join, not \`= ANY(locked)\`: a storm's thousands of rows against its thousand turns.
        FROM input i LEFT JOIN ${s}.turns t ON t.turn_id = i.turn_id
          LEFT JOIN (SELECT DISTINCT unnest(locked) AS turn_id) l ON l.turn_id = i.turn_id
        -- Earlier rows of the turn in its own session (another session's are refused, and decide nothing).
        WINDOW earlier AS (PARTITION BY i.turn_id, i.session_id ORDER BY i.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
               turn_rows AS (PARTITION BY i.turn_id ORDER BY i.ord)
      ), held AS (
        -- A session with a busy row writes none: its rows keep their order when sent again.
        SELECT j.*, bool_or(j.verdict = 'busy') OVER (PARTITION BY j.session_id) AS wait FROM judged j
      ), fresh AS (
        -- A new turn's row; one another session inserted meanwhile is not ours (its rows: busy, judged again).
        INSERT INTO ${s}.turns AS t (turn_id, session_id, owner, last_seq, cancelling, end_seq, status)
        SELECT turn_id, (array_agg(session_id ORDER BY ord))[1], p_owner, base + max(ord),
          coalesce(bool_or(status = 'cancelling'), false),
          base + min(ord) FILTER (WHERE status = ANY(${terminal})),
          (array_agg(status ORDER BY ord) FILTER (WHERE status = ANY(${terminal})))[1]
        FROM held WHERE verdict = 'ok' AND NOT wait AND NOT known GROUP BY turn_id
        ON CONFLICT (turn_id) DO NOTHING
        RETURNING turn_id
      ), fated AS (
        SELECT h.*, CASE
          WHEN h.wait THEN 'busy'
          WHEN h.verdict = 'ok' AND NOT h.known AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.turn_id = h.turn_id) THEN 'busy'
          ELSE h.verdict END AS fate
        FROM held h
      ), inserted AS (
        INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
        SELECT base + ord, session_id, turn_id, type, at, body::json, p_writer, local_seq FROM fated WHERE fate = 'ok'
      ), moved AS (
        UPDATE ${s}.turns t SET
          last_seq = a.last_seq,
          cancelling = t.cancelling OR a.cancelling,
          end_seq = coalesce(t.end_seq, a.end_seq),
          status = coalesce(t.status, a.status)
        FROM (
          SELECT turn_id, base + max(ord) AS last_seq, coalesce(bool_or(status = 'cancelling'), false) AS cancelling,
            base + min(ord) FILTER (WHERE status = ANY(${terminal})) AS end_seq,
            (array_agg(status ORDER BY ord) FILTER (WHERE status = ANY(${terminal})))[1] AS status
          FROM fated WHERE fate = 'ok' AND known GROUP BY turn_id
        ) a
        WHERE t.turn_id = a.turn_id
      )
      SELECT array_agg(CASE fate WHEN 'written' THEN 'ok' ELSE fate END ORDER BY ord) INTO verdicts FROM fated;
      RETURN verdicts;
    END
    $fn$`,
  ];
  const horizon = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << ${SEQ_SHIFT}) + coalesce((SELECT value FROM ${s}.meta WHERE key = 'seq_offset'), 0)`;
  return {
    schema: s,
    tables,
    upgrade,
    recordVersion: `INSERT INTO ${s}.meta (key, value) VALUES ('version', ${SCHEMA_VERSION}), ('seq_offset', $1::bigint)
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    version: `SELECT value FROM ${s}.meta WHERE key = 'version'`,
    hasTables: `SELECT to_regclass('${s}.entries') IS NOT NULL AS present`,
    migrationLock: 'SELECT pg_advisory_xact_lock(hashtext($1))',
    append: `SELECT ${s}.append_entries($1, $2, $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], string_to_array($9, chr(10)), $10, $11, $12, $13) AS verdicts`,
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
