/**
 * The SQL of `append_entries`, the one decision that writes (its invariants: statements.ts). Two
 * ways through it decide alike:
 * - a few rows (a stop's intent, its history, a turn's start): one statement locks and reads the
 *   rows' turns, the rows are judged in the function's own variables (no statement a row), then
 *   the turns move and the entries are written (a statement each, one more for new turns);
 * - a storm's thousands (`append_set`): one statement judges them as sets, looking each turn up
 *   once (hash joins and aggregates, no window), then the same writes as sets, from the arguments
 *   and the verdicts (no body is carried through the judging).
 * Cheap on purpose: `seq_offset` is a literal (baked at upgrade: it never changes once recorded),
 * and the lock timeout, the session lock and the numbers are plain expressions (no executor).
 */

import { TERMINAL_STATUSES } from '../../constants.js';

/** `seq`'s low bits: a row's place in its batch (statements.ts invariant 2). */
export const SEQ_SHIFT = 12;
/** The most rows one call of `append_entries` takes (below 2^SEQ_SHIFT). */
export const MAX_BATCH_ROWS = 4000;
/** Batches up to this many rows are judged row by row, larger ones as one set (both decide alike). */
const SMALL_BATCH = 16;

/** The function's arguments (the client's `$1`…`$13`: statements.ts `append`). */
const SIGNATURE = `p_owner text, p_writer text, p_local bigint[], p_session text[], p_turn text[], p_type text[],
      p_status text[], p_at bigint[], p_body text[], p_expect_turn text, p_expect_last bigint, p_lock_ms integer, p_resent boolean`;

/**
 * `CREATE OR REPLACE FUNCTION` of `append_entries` in schema `s` (quoted; `schemaName` as given),
 * numbering with `seqOffset` (the schema's recorded `seq_offset`, a non-negative integer).
 */
export function appendEntriesFunction(s: string, schemaName: string, seqOffset: bigint): string {
  if (seqOffset < 0n) throw new RangeError(`appendEntriesFunction: seqOffset must be ≥ 0, got ${seqOffset}`);
  const terminal = `ARRAY[${TERMINAL_STATUSES.map((t) => `'${t}'`).join(', ')}]`;
  // The session lock's key: the schema and the session, hashed to 64 bits (a collision only makes two sessions take turns).
  const sessionKey = (expr: string) => `hashtextextended('${schemaName}:' || ${expr}, 0)`;
  return `CREATE OR REPLACE FUNCTION ${s}.append_entries(${SIGNATURE})
    RETURNS text[] LANGUAGE plpgsql AS $fn$
    DECLARE
      n integer := cardinality(p_local);
      single boolean := p_session[1] = ALL(p_session);
      verdicts text[] := '{}';
      busy text[] := '{}';
      base bigint;
      setting text;
      -- The small path's turns (the batch's, found or new) and what the batch does to each.
      t_id text[]; t_session text[]; t_owner text[]; t_end bigint[];
      f_id text[]; f_session text[]; f_owner text[]; f_end bigint[];
      t_last bigint[]; t_cancel boolean[]; t_status text[]; t_new boolean[];
      locked integer;
      j integer;
      write boolean[] := '{}';
      lost text[];
    BEGIN
      IF n > ${MAX_BATCH_ROWS} THEN
        RAISE EXCEPTION 'append_entries: % rows, at most ${MAX_BATCH_ROWS} a call', n USING ERRCODE = '54000';
      END IF;
      -- 1. Every lock wait of this transaction ends before the client gives up.
      setting := set_config('lock_timeout', greatest(p_lock_ms, 1)::text, true);
      -- 1. The sessions' locks, in key order, before the transaction has an xid; one held elsewhere: busy.
      IF single THEN
        IF NOT pg_try_advisory_xact_lock(${sessionKey('p_session[1]')}) THEN RETURN array_fill('busy'::text, ARRAY[n]); END IF;
      ELSE
        -- One statement, not a loop (a storm's thousand sessions): the sorted subquery is not flattened,
        -- so the locks are tried in its order.
        SELECT coalesce(array_agg(d.s) FILTER (WHERE NOT pg_try_advisory_xact_lock(d.k)), '{}') INTO busy
          FROM (SELECT u.s, ${sessionKey('u.s')} AS k FROM (SELECT DISTINCT unnest(p_session) AS s) u ORDER BY 2) d;
      END IF;
      IF p_expect_turn IS NOT NULL THEN
        IF cardinality(busy) > 0 THEN RETURN array_fill('busy'::text, ARRAY[n]); END IF;
        IF NOT EXISTS (SELECT 1 FROM ${s}.entries WHERE writer = p_writer AND local_seq = p_local[1])
          AND NOT EXISTS (SELECT 1 FROM ${s}.turns
                          WHERE turn_id = p_expect_turn AND end_seq IS NULL AND last_seq = p_expect_last) THEN
          RETURN array_fill('stale'::text, ARRAY[n]);
        END IF;
      END IF;
      -- 2. The numbers: this transaction's xid (assigned here, after the session locks).
      base := (pg_current_xact_id()::text::bigint << ${SEQ_SHIFT}) + ${seqOffset};
      IF base >= (1::bigint << 53) - (1::bigint << ${SEQ_SHIFT}) THEN
        RAISE EXCEPTION 'append_entries: seq past 2^53 (xid %)', pg_current_xact_id() USING ERRCODE = '54000';
      END IF;
      IF n > ${SMALL_BATCH} THEN
        RETURN ${s}.append_set(p_owner, p_writer, p_local, p_session, p_turn, p_type, p_status, p_at, p_body, p_expect_turn, p_resent, busy, base);
      END IF;
      -- 1. The rows' own turns, locked, with what they are judged by; one someone else holds is not here.
      IF single AND p_turn[1] = ALL(p_turn) THEN
        -- One turn (a stop's intent, its history, a turn's start): one row, by its key.
        SELECT ARRAY[t.turn_id], ARRAY[t.session_id], ARRAY[t.owner], ARRAY[t.end_seq] INTO t_id, t_session, t_owner, t_end
          FROM ${s}.turns t WHERE t.turn_id = p_turn[1] AND t.session_id = p_session[1]
          FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN t_id := '{}'; t_session := '{}'; t_owner := '{}'; t_end := '{}'; END IF;
      ELSIF single THEN
        SELECT coalesce(array_agg(x.turn_id), '{}'), coalesce(array_agg(x.session_id), '{}'), coalesce(array_agg(x.owner), '{}'),
            coalesce(array_agg(x.end_seq), '{}')
          INTO t_id, t_session, t_owner, t_end FROM (
          SELECT t.turn_id, t.session_id, t.owner, t.end_seq FROM ${s}.turns t
          WHERE t.turn_id = ANY(p_turn) AND t.session_id = p_session[1]
          FOR NO KEY UPDATE SKIP LOCKED) x;
      ELSE
        SELECT coalesce(array_agg(x.turn_id), '{}'), coalesce(array_agg(x.session_id), '{}'), coalesce(array_agg(x.owner), '{}'),
            coalesce(array_agg(x.end_seq), '{}')
          INTO t_id, t_session, t_owner, t_end FROM (
          SELECT t.turn_id, t.session_id, t.owner, t.end_seq FROM ${s}.turns t
          WHERE t.turn_id = ANY(p_turn)
            AND (t.turn_id, t.session_id) IN (SELECT u.t, u.s FROM unnest(p_turn, p_session) AS u(t, s) WHERE NOT (u.s = ANY(busy)))
          FOR NO KEY UPDATE SKIP LOCKED) x;
      END IF;
      locked := cardinality(t_id);
      FOR i IN 1..n LOOP
        IF NOT (p_session[i] = ANY(busy)) AND NOT (p_turn[i] = ANY(t_id)) THEN j := i; EXIT; END IF;
      END LOOP;
      IF j IS NOT NULL THEN
        -- Rows of turns not locked: another session's, new ones, or held elsewhere (then the session waits whole).
        IF single AND p_turn[1] = ALL(p_turn) THEN
          SELECT ARRAY[t.turn_id], ARRAY[t.session_id], ARRAY[t.owner], ARRAY[t.end_seq] INTO f_id, f_session, f_owner, f_end
            FROM ${s}.turns t WHERE t.turn_id = p_turn[1];
          IF NOT FOUND THEN f_id := '{}'; f_session := '{}'; f_owner := '{}'; f_end := '{}'; END IF;
        ELSE
          SELECT coalesce(array_agg(t.turn_id), '{}'), coalesce(array_agg(t.session_id), '{}'), coalesce(array_agg(t.owner), '{}'),
              coalesce(array_agg(t.end_seq), '{}')
            INTO f_id, f_session, f_owner, f_end
            FROM ${s}.turns t WHERE t.turn_id = ANY(p_turn) AND NOT (t.turn_id = ANY(t_id));
        END IF;
        t_id := t_id || f_id; t_session := t_session || f_session; t_owner := t_owner || f_owner; t_end := t_end || f_end;
        FOR i IN 1..n LOOP
          j := array_position(t_id, p_turn[i]);
          IF j > locked AND t_session[j] = p_session[i] AND NOT (p_session[i] = ANY(busy)) THEN busy := busy || p_session[i]; END IF;
        END LOOP;
      END IF;
      -- What the batch does to each turn, one place a turn of t_id from 1 on: an element assigned first
      -- at [2] of an empty array would make an array of lower bound 2, and unnest pairs by position.
      t_last := array_fill(NULL::bigint, ARRAY[cardinality(t_id)]); t_cancel := array_fill(NULL::boolean, ARRAY[cardinality(t_id)]);
      t_status := array_fill(NULL::text, ARRAY[cardinality(t_id)]); t_new := array_fill(NULL::boolean, ARRAY[cardinality(t_id)]);
      -- 3. One verdict a row, in order; an accepted row moves its turn (or makes a new one) here, written below.
      FOR i IN 1..n LOOP
        write[i] := false;
        IF p_session[i] = ANY(busy) THEN verdicts[i] := 'busy'; CONTINUE; END IF;
        IF p_resent THEN
          IF EXISTS (SELECT 1 FROM ${s}.entries WHERE writer = p_writer AND local_seq = p_local[i]) THEN verdicts[i] := 'ok'; CONTINUE; END IF;
        END IF;
        j := array_position(t_id, p_turn[i]);
        IF j IS NULL THEN
          j := cardinality(t_id) + 1;
          t_id[j] := p_turn[i]; t_session[j] := p_session[i]; t_owner[j] := p_owner; t_end[j] := NULL; t_new[j] := true;
        ELSIF t_session[j] <> p_session[i] THEN verdicts[i] := 'session'; CONTINUE;
        ELSIF t_owner[j] <> p_owner AND p_expect_turn IS NULL THEN verdicts[i] := 'owner'; CONTINUE;
        ELSIF p_type[i] = 'turn_started' THEN verdicts[i] := 'used'; CONTINUE;
        ELSIF t_end[j] IS NOT NULL THEN verdicts[i] := 'ended'; CONTINUE;
        END IF;
        t_last[j] := base + i;
        IF p_status[i] = 'cancelling' THEN t_cancel[j] := true; END IF;
        IF p_status[i] = ANY(${terminal}) THEN t_end[j] := base + i; t_status[j] := p_status[i]; END IF;
        verdicts[i] := 'ok';
        write[i] := true;
      END LOOP;
      IF true = ANY(t_new) THEN
        -- A new turn another session's transaction inserted meanwhile is not ours: its rows are busy, judged again.
        WITH fresh AS (
          INSERT INTO ${s}.turns (turn_id, session_id, owner, last_seq, cancelling, end_seq, status)
          SELECT u.id, u.sess, p_owner, u.last, coalesce(u.c, false), u.e, u.st
          FROM unnest(t_id, t_session, t_last, t_cancel, t_end, t_status, t_new) AS u(id, sess, last, c, e, st, nw) WHERE u.nw
          ON CONFLICT (turn_id) DO NOTHING
          RETURNING turn_id
        )
        SELECT coalesce(array_agg(u.id), '{}') INTO lost FROM unnest(t_id, t_new) AS u(id, nw)
          WHERE u.nw AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.turn_id = u.id);
        IF cardinality(lost) > 0 THEN
          FOR i IN 1..n LOOP
            IF write[i] AND p_turn[i] = ANY(lost) THEN verdicts[i] := 'busy'; write[i] := false; END IF;
          END LOOP;
        END IF;
      END IF;
      IF NOT (true = ANY(write)) THEN
        RETURN verdicts;
      ELSIF cardinality(t_id) = 1 AND t_new[1] IS NULL THEN
        -- One turn, known: moved by its key.
        UPDATE ${s}.turns t SET
          last_seq = t_last[1],
          cancelling = t.cancelling OR coalesce(t_cancel[1], false),
          end_seq = coalesce(t.end_seq, t_end[1]),
          status = coalesce(t.status, t_status[1])
        WHERE t.turn_id = t_id[1];
        INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
        SELECT base + u.o, u.sess, u.turn, u.type, u.at, u.body::json, p_writer, u.loc
        FROM unnest(p_session, p_turn, p_type, p_at, p_body, p_local, write) WITH ORDINALITY AS u(sess, turn, type, at, body, loc, w, o)
        WHERE u.w;
      ELSE
        WITH moved AS (
          UPDATE ${s}.turns t SET
            last_seq = u.last,
            cancelling = t.cancelling OR coalesce(u.c, false),
            end_seq = coalesce(t.end_seq, u.e),
            status = coalesce(t.status, u.st)
          FROM unnest(t_id, t_last, t_cancel, t_end, t_status, t_new) AS u(id, last, c, e, st, nw)
          WHERE u.last IS NOT NULL AND u.nw IS NULL AND t.turn_id = u.id
        )
        INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
        SELECT base + u.o, u.sess, u.turn, u.type, u.at, u.body::json, p_writer, u.loc
        FROM unnest(p_session, p_turn, p_type, p_at, p_body, p_local, write) WITH ORDINALITY AS u(sess, turn, type, at, body, loc, w, o)
        WHERE u.w;
      END IF;
      RETURN verdicts;
    END
    $fn$`;
}

/**
 * `append_set`: the set path of `append_entries` (its caller took the locks and the numbers:
 * `busy` are the sessions locked elsewhere, `base` the batch's first seq less one). It judges the
 * rows without their bodies, then writes from the arguments and the verdicts: no body is copied
 * through the judging. Not for direct use: it decides only under the locks its caller holds.
 */
export function appendSetFunction(s: string): string {
  const terminal = `ARRAY[${TERMINAL_STATUSES.map((t) => `'${t}'`).join(', ')}]`;
  return `CREATE OR REPLACE FUNCTION ${s}.append_set(
      p_owner text, p_writer text, p_local bigint[], p_session text[], p_turn text[], p_type text[], p_status text[], p_at bigint[],
      p_body text[], p_expect_turn text, p_resent boolean, busy text[], base bigint)
    RETURNS text[] LANGUAGE plpgsql
    -- Hashes, never sorts: a custom plan (a connection's first calls) knows the arrays' sizes and would
    -- merge-join and group by sorting thousands of ids in the database's collation (~3 ms of a storm's 3,000 rows).
    SET enable_mergejoin = off SET enable_sort = off
    AS $fn$
    DECLARE
      locked text[];
      verdicts text[];
      lost text[];
    BEGIN
      -- 1. The rows' own turns, locked; one someone else holds makes its session busy.
      SELECT coalesce(array_agg(x.turn_id), '{}') INTO locked FROM (
        SELECT t.turn_id FROM ${s}.turns t
        WHERE (t.turn_id, t.session_id) IN (SELECT u.t, u.s FROM unnest(p_turn, p_session) AS u(t, s) WHERE NOT (u.s = ANY(busy)))
        FOR NO KEY UPDATE SKIP LOCKED) x;
      -- 3. One verdict a row: \`new\` is an accepted row of a turn not in the table yet, \`written\` one a lost attempt wrote.
      WITH input AS (
        SELECT u.*, NOT (u.session_id = ANY(busy)) AS free
        FROM unnest(p_local, p_session, p_turn, p_type, p_status) WITH ORDINALITY AS u(local_seq, session_id, turn_id, type, status, ord)
      ), firsts AS (
        -- The rows of a turn in one session: the first, the first turn_started, the first end.
        SELECT turn_id, session_id, min(ord) AS first, min(ord) FILTER (WHERE type = 'turn_started') AS started,
          min(ord) FILTER (WHERE status = ANY(${terminal})) AS ended
        FROM input GROUP BY turn_id, session_id
      ), turn_first AS (
        SELECT turn_id, min(first) AS first FROM firsts GROUP BY turn_id
      ), groups AS MATERIALIZED (
        -- What decides a turn's rows of one session, looked up once a group (not once a row).
        SELECT f.turn_id, f.session_id, f.started, f.ended, f.first <> tf.first AS later, t.turn_id IS NOT NULL AS known,
          t.session_id AS t_session, t.owner AS t_owner, t.end_seq AS t_end, l.turn_id IS NOT NULL AS locked
        FROM firsts f JOIN turn_first tf ON tf.turn_id = f.turn_id
          LEFT JOIN ${s}.turns t ON t.turn_id = f.turn_id
          -- A join, not \`= ANY(locked)\`: a storm's thousand turns against its thousand locked.
          LEFT JOIN (SELECT DISTINCT unnest(locked) AS turn_id) l ON l.turn_id = f.turn_id
      )
      SELECT array_agg(CASE
          WHEN NOT i.free THEN 'busy'
          WHEN p_resent AND EXISTS (SELECT 1 FROM ${s}.entries e WHERE e.writer = p_writer AND e.local_seq = i.local_seq) THEN 'written'
          WHEN g.known AND g.t_session <> i.session_id THEN 'session'
          -- A new turn is the session's of its first row; another session's rows are refused, and decide nothing.
          WHEN NOT g.known AND g.later THEN 'session'
          WHEN g.known AND NOT g.locked THEN 'busy'
          WHEN g.known AND g.t_owner <> p_owner AND p_expect_turn IS NULL THEN 'owner'
          WHEN i.type = 'turn_started' AND (g.known OR g.started < i.ord) THEN 'used'
          WHEN g.t_end IS NOT NULL OR g.ended < i.ord THEN 'ended'
          WHEN NOT g.known THEN 'new'
          ELSE 'ok' END ORDER BY i.ord) INTO verdicts
      FROM input i JOIN groups g ON g.turn_id = i.turn_id AND g.session_id = i.session_id;
      IF 'busy' = ANY(verdicts) THEN
        -- A session with a busy row writes none: its rows keep their order when sent again.
        SELECT array_agg(CASE WHEN w.session_id IS NOT NULL THEN 'busy' ELSE u.verdict END ORDER BY u.ord) INTO verdicts
        FROM unnest(p_session, verdicts) WITH ORDINALITY AS u(session_id, verdict, ord)
          LEFT JOIN (SELECT DISTINCT v.session_id FROM unnest(p_session, verdicts) AS v(session_id, verdict) WHERE v.verdict = 'busy') w
          ON w.session_id = u.session_id;
      END IF;
      IF 'new' = ANY(verdicts) THEN
        -- A new turn's row (its accepted rows are of one session, at most one of them an end); one another
        -- session inserted meanwhile is not ours (its rows: busy, judged again).
        WITH fresh AS (
          INSERT INTO ${s}.turns (turn_id, session_id, owner, last_seq, cancelling, end_seq, status)
          SELECT u.turn_id, min(u.session_id), p_owner, base + max(u.ord), coalesce(bool_or(u.status = 'cancelling'), false),
            base + min(u.ord) FILTER (WHERE u.status = ANY(${terminal})), min(u.status) FILTER (WHERE u.status = ANY(${terminal}))
          FROM unnest(p_turn, p_session, p_status, verdicts) WITH ORDINALITY AS u(turn_id, session_id, status, verdict, ord)
          WHERE u.verdict = 'new' GROUP BY u.turn_id
          ON CONFLICT (turn_id) DO NOTHING
          RETURNING turn_id
        )
        SELECT coalesce(array_agg(DISTINCT u.turn_id), '{}') INTO lost FROM unnest(p_turn, verdicts) AS u(turn_id, verdict)
          WHERE u.verdict = 'new' AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.turn_id = u.turn_id);
        IF cardinality(lost) > 0 THEN
          SELECT array_agg(CASE WHEN u.verdict = 'new' AND u.turn_id = ANY(lost) THEN 'busy' ELSE u.verdict END ORDER BY u.ord) INTO verdicts
          FROM unnest(p_turn, verdicts) WITH ORDINALITY AS u(turn_id, verdict, ord);
        END IF;
      END IF;
      -- A turn's accepted rows hold at most one end (a later row is \`ended\`).
      WITH moved AS (
        UPDATE ${s}.turns t SET
          last_seq = a.last_seq,
          cancelling = t.cancelling OR a.cancelling,
          end_seq = coalesce(t.end_seq, a.end_seq),
          status = coalesce(t.status, a.status)
        FROM (
          SELECT u.turn_id, base + max(u.ord) AS last_seq, coalesce(bool_or(u.status = 'cancelling'), false) AS cancelling,
            base + min(u.ord) FILTER (WHERE u.status = ANY(${terminal})) AS end_seq,
            min(u.status) FILTER (WHERE u.status = ANY(${terminal})) AS status
          FROM unnest(p_turn, p_status, verdicts) WITH ORDINALITY AS u(turn_id, status, verdict, ord)
          WHERE u.verdict = 'ok' GROUP BY u.turn_id
        ) a
        WHERE t.turn_id = a.turn_id
      )
      INSERT INTO ${s}.entries (seq, session_id, turn_id, type, at, body, writer, local_seq)
      SELECT base + u.ord, u.session_id, u.turn_id, u.type, u.at, u.body::json, p_writer, u.local_seq
      FROM unnest(p_local, p_session, p_turn, p_type, p_at, p_body, verdicts)
        WITH ORDINALITY AS u(local_seq, session_id, turn_id, type, at, body, verdict, ord)
      WHERE u.verdict IN ('ok', 'new');
      RETURN array_replace(array_replace(verdicts, 'written', 'ok'), 'new', 'ok');
    END
    $fn$`;
}
