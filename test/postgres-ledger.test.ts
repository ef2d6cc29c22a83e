/**
 * `fullstop/postgres`'s `PgLedger` against the real PostgreSQL of this machine: its options, the
 * file ledger's entry objects in the database's order, paging, the migration when instances open
 * at once, the turn-id and ended-turn decisions made by the database for every instance, restart
 * repair, `closeAbandonedTurn`, `close`, and that `fullstop` never loads `pg`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, TurnIdUsedError, type LedgerEntry, type LedgerEntryInput } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgLedgerHooks } from '../dist/src/ledger/postgres/pg-ledger-hooks.js';
import { INTERRUPTED_TOOL_TEXT, TURN_ABORTED_MARKER } from '../dist/src/ledger/entry.js';
import { statementsFor } from '../dist/src/ledger/postgres/statements.js';
import { pgScene } from './support/pg.js';

const pg = pgScene('ledger');
const dirs: string[] = [];
afterEach(() => { for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true }); });

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);
const open = (schema: string, instanceId: string, extra: object = {}) => PgLedger.open({ pool: pg.pool(), schema, instanceId, ...extra });

describe('PgLedger.open', () => {
  it('refuses bad options with a TypeError or RangeError naming the option, before touching the database', async () => {
    const pool = pg.pool();
    const cases: [unknown, ErrorConstructor, RegExp][] = [
      [undefined, TypeError, /options: expected an object/],
      [{}, TypeError, /options\.pool: expected a pg\.Pool/],
      [{ pool: {} }, TypeError, /options\.pool/],
      [{ pool, schema: 7 }, TypeError, /options\.schema/],
      [{ pool, schema: 'a"; drop table x; --' }, RangeError, /options\.schema/],
      [{ pool, schema: 'x'.repeat(64) }, RangeError, /options\.schema/],
      [{ pool, instanceId: '' }, TypeError, /options\.instanceId/],
      [{ pool, instanceId: 'i'.repeat(1025) }, RangeError, /options\.instanceId: at most 1024/],
      [{ pool, timeoutMs: '5' }, TypeError, /options\.timeoutMs/],
      [{ pool, timeoutMs: 0 }, RangeError, /options\.timeoutMs/],
      [{ pool, timeoutMs: -1 }, RangeError, /options\.timeoutMs/],
      [{ pool, intentTimeoutMs: Number.NaN }, RangeError, /options\.intentTimeoutMs/],
      // In a scene's schema: an option not refused would otherwise open the default one.
      [{ pool, schema: pg.schema(), closeWaitMs: '10' }, TypeError, /options\.closeWaitMs/],
      [{ pool, schema: pg.schema(), closeWaitMs: -1 }, RangeError, /options\.closeWaitMs/],
      [{ pool, schema: pg.schema(), preparedStatements: 'yes' }, TypeError, /options\.preparedStatements/],
    ];
    for (const [options, type, message] of cases) {
      await expect(PgLedger.open(options as never)).rejects.toThrow(type);
      await expect(PgLedger.open(options as never)).rejects.toThrow(message);
    }
    expect(await pg.leftSchemas()).toEqual([]);
  });

  it('appends through a prepared statement (one a connection), or plain statements with preparedStatements: false', async () => {
    const schema = pg.schema();
    const pool = pg.pool(undefined, { max: 1 });
    const prepared = await PgLedger.open({ pool, schema, instanceId: 'p' });
    await prepared.append({ sessionId: 's', turnId: 't1', type: 'turn_started' });
    await prepared.append({ sessionId: 's', turnId: 't1', type: 'status', status: 'completed' });
    const named = async () => {
      const client = await pool.connect();
      try {
        return (await client.query("SELECT name FROM pg_prepared_statements WHERE name LIKE 'fullstop_append_%'")).rows.length;
      } finally {
        client.release();
      }
    };
    expect(await named()).toBe(1); // the pool's one connection prepared it once, for both appends
    await prepared.close();
    const plainPool = pg.pool(undefined, { max: 1 });
    const plain = await PgLedger.open({ pool: plainPool, schema, instanceId: 'q', preparedStatements: false });
    await plain.append({ sessionId: 's', turnId: 't2', type: 'turn_started' });
    const client = await plainPool.connect();
    try {
      expect((await client.query("SELECT name FROM pg_prepared_statements WHERE name LIKE 'fullstop_append_%'")).rows).toEqual([]);
    } finally {
      client.release();
    }
    expect((await plain.entries({ sessionId: 's' })).map((e) => e.turnId)).toEqual(['t1', 't1', 't2']);
    await plain.close();
  });

  it('creates its tables once when several instances open a fresh schema at once', async () => {
    const schema = pg.schema();
    const ledgers = await Promise.all(Array.from({ length: 6 }, (_, i) => open(schema, `i${i}`)));
    await ledgers[0]!.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    expect((await ledgers[5]!.entries()).map(typeOf)).toEqual(['turn_started']);
    await Promise.all(ledgers.map((l) => l.close()));
  });
});

describe('entries', () => {
  it('are the file ledger\'s entry objects, in the database\'s seq order, across instances', async () => {
    const schema = pg.schema();
    const [a, b] = [await open(schema, 'A'), await open(schema, 'B')];
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-pg-file-'));
    dirs.push(dir);
    const file = await Ledger.open(join(dir, 'history.jsonl'));
    const writes: [PgLedger, LedgerEntryInput][] = [
      [a, { sessionId: 's1', turnId: 't1', type: 'turn_started', input: { text: 'hi', n: [1, 2] } }],
      [b, { sessionId: 's2', turnId: 't2', type: 'turn_started' }],
      [a, { sessionId: 's1', turnId: 't1', type: 'tool_call', callId: 'c1', name: 'search', args: undefined }],
      [b, { sessionId: 's2', turnId: 't2', type: 'say', text: 'é\u2028"quoted"' }],
      [a, { sessionId: 's1', turnId: 't1', type: 'tool_output', callId: 'c1', output: { rows: [] }, success: true }],
      [a, { sessionId: 's1', turnId: 't1', type: 'status', status: 'completed' }],
    ];
    for (const [ledger, entry] of writes) {
      // Committed one after the other: each transaction's xid, so its seq, is above the one before.
      await ledger.append(entry);
      await ledger.flush();
      await file.append(entry);
    }
    await file.flush();
    const withoutAt = (es: LedgerEntry[]) => es.map(({ at, seq, ...rest }) => { expect(typeof at).toBe('number'); expect(Number.isSafeInteger(seq)).toBe(true); return rest; });
    const fromB = await b.entries();
    expect(fromB.map((e) => e.seq)).toEqual(fromB.map((e) => e.seq).sort((x, y) => x - y));
    expect(withoutAt(fromB)).toEqual(withoutAt(await file.entries()));
    expect(fromB.map((e) => Object.keys(e).slice(0, 5))).toEqual(fromB.map(() => ['seq', 'at', 'sessionId', 'turnId', 'type']));
    expect(withoutAt(await a.entries({ sessionId: 's1' }))).toEqual(withoutAt(await file.entries({ sessionId: 's1' })));
    expect((await a.entries({ turnId: 't2' })).map(typeOf)).toEqual(['turn_started', 'say']);
    await file.close();
    await a.close();
    await b.close();
  });

  it('page one session with afterSeq and limit, and refuse a bad filter naming the field', async () => {
    const schema = pg.schema();
    const ledger = await open(schema, 'A');
    await Promise.all(Array.from({ length: 10 }, (_, i) => ledger.append({ sessionId: i % 2 === 0 ? 'even' : 'odd', turnId: `t${i}`, type: 'turn_started' })));
    const all = await ledger.entries({ sessionId: 'even' });
    expect(all.map((e) => e.turnId)).toEqual(['t0', 't2', 't4', 't6', 't8']);
    const pages: string[][] = [];
    for (let after = 0; ;) {
      const page = await ledger.entries({ sessionId: 'even', afterSeq: after, limit: 2 });
      if (page.length === 0) break;
      pages.push(page.map((e) => e.turnId));
      after = page.at(-1)!.seq;
    }
    expect(pages).toEqual([['t0', 't2'], ['t4', 't6'], ['t8']]);
    expect(await ledger.entries({ sessionId: 'none' })).toEqual([]);
    await expect(ledger.entries(null as never)).rejects.toThrow(/filter: expected an object/);
    await expect(ledger.entries({ sessionId: '' })).rejects.toThrow(TypeError);
    await expect(ledger.entries({ turnId: 'x'.repeat(1025) })).rejects.toThrow(/filter\.turnId: at most 1024/);
    await expect(ledger.entries({ afterSeq: '3' as never })).rejects.toThrow(/filter\.afterSeq: expected a seq/);
    await expect(ledger.entries({ afterSeq: -1 })).rejects.toThrow(RangeError);
    await expect(ledger.entries({ limit: 1.5 })).rejects.toThrow(/filter\.limit/);
    await expect(ledger.entries({ limit: 0 })).rejects.toThrow(RangeError);
    await ledger.close();
  });

  it('refuse a bad filter exactly as the file Ledger does (the same check, limit: 0 included)', async () => {
    const ledger = await open(pg.schema(), 'A');
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-pg-file-'));
    dirs.push(dir);
    const file = await Ledger.open(join(dir, 'history.jsonl'));
    const bad: unknown[] = [
      null, 7, 'filter', { sessionId: '' }, { sessionId: 7 }, { turnId: 'x'.repeat(1025) }, { afterSeq: '3' }, { afterSeq: -1 }, { afterSeq: 1.5 },
      { afterSeq: Number.MAX_SAFE_INTEGER + 1 }, { limit: 0 }, { limit: -1 }, { limit: 1.5 }, { limit: Infinity }, { limit: null }, { limit: '2' },
    ];
    for (const filter of bad) {
      const [fromPg, fromFile] = await Promise.all([ledger.entries(filter as never).catch((e: Error) => e), file.entries(filter as never).catch((e: Error) => e)]);
      expect(fromFile, JSON.stringify(filter)).toBeInstanceOf(Error);
      expect(fromPg, JSON.stringify(filter)).toBeInstanceOf((fromFile as Error).constructor);
      expect((fromPg as Error).message).toBe((fromFile as Error).message.replace(/^Ledger\.entries/, 'PgLedger.entries'));
    }
    expect(await ledger.entries({ limit: 1 })).toEqual(await file.entries({ limit: 1 }));
    await file.close();
    await ledger.close();
  });
});

describe('the session index', () => {
  it('entries({ sessionId }) reads that session\'s rows through entries_by_session, not the table', async () => {
    const schema = pg.schema();
    const pool = pg.pool();
    const ledger = await PgLedger.open({ pool, schema, instanceId: 'A' });
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 200 }, (_, i) => ledger.append({ sessionId: `s${batch * 200 + i}`, turnId: `t${batch * 200 + i}`, type: 'turn_started' })));
    }
    await pool.query(`ANALYZE "${schema}".entries`);
    const { text } = statementsFor(schema).selectEntries({ sessionId: true, turnId: false, afterSeq: true, limit: true });
    const client = await pool.connect();
    try {
      // The plan the database picks for these values (a generic plan too: no session is special).
      await client.query('SET plan_cache_mode = force_generic_plan');
      const { rows } = await client.query({ text: `EXPLAIN ${text}`, values: ['s7', 0, 50] });
      const plan = rows.map((r) => r['QUERY PLAN'] as string).join('\n');
      expect(plan).toContain('entries_by_session');
      expect(plan).not.toMatch(/Seq Scan/);
    } finally {
      client.release();
    }
    expect((await ledger.entries({ sessionId: 's7' })).map((e) => e.turnId)).toEqual(['t7']);
    await ledger.close();
  });
});

describe('what the database decides, for every instance', () => {
  it('a turn id is used once: a second turn_started rejects with TurnIdUsedError, also when two instances start it at once', async () => {
    const schema = pg.schema();
    const [a, b] = [await open(schema, 'A'), await open(schema, 'B')];
    await a.append({ sessionId: 's', turnId: 't-used', type: 'turn_started' });
    expect(b.hasTurn('t-used')).toBe(false); // a local hint only
    const refused = await b.append({ sessionId: 's2', turnId: 't-used', type: 'turn_started' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TurnIdUsedError);
    expect(refused).toMatchObject({ code: 'ERR_FULLSTOP_TURN_ID_USED', turnId: 't-used' });

    for (let round = 0; round < 5; round++) {
      const turnId = `t-race-${round}`;
      const results = await Promise.allSettled([a, b].map((l, i) => l.append({ sessionId: `s${i}`, turnId, type: 'turn_started' })));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toBeInstanceOf(TurnIdUsedError);
      expect(await a.entries({ turnId })).toHaveLength(1);
    }
    await a.close();
    await b.close();
  });

  it('an append for a turn another instance ended is refused in its transaction, and nothing of it is written', async () => {
    const schema = pg.schema();
    const [a, b] = [await open(schema, 'A'), await open(schema, 'B')];
    await a.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await a.append({ sessionId: 's', turnId: 't', type: 'tool_call', callId: 'c', name: 'n', args: {} });
    await a.flush();
    expect(await b.closeAbandonedTurn('s', 't')).toBe(true);
    await a.append({ sessionId: 's', turnId: 't', type: 'tool_output', callId: 'c', output: 'late', success: true }); // queued
    // In the same batch, another turn's entry is written: the refusal is of the one row.
    const other = a.append({ sessionId: 's2', turnId: 't2', type: 'turn_started' });
    await expect(a.flush()).rejects.toThrow(/turn "t" has ended/);
    await other;
    // The refusal known, the turn's next append rejects with it.
    await expect(a.append({ sessionId: 's', turnId: 't', type: 'say', text: 'more' })).rejects.toThrow(/turn "t" has ended/);
    expect((await b.entries({ sessionId: 's' })).map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
    // An end in the same batch as later entries refuses those too.
    const ends = [
      a.append({ sessionId: 's2', turnId: 't2', type: 'status', status: 'completed' }),
      a.append({ sessionId: 's2', turnId: 't2', type: 'status', status: 'failed', reason: 'after the end' }),
    ];
    await ends[0];
    await expect(ends[1]).rejects.toThrow(/has ended/);
    expect((await b.entries({ sessionId: 's2' })).map(typeOf)).toEqual(['turn_started', 'status:completed']);
    await a.close();
    await b.close();
  });
});

describe('ids the text columns cannot hold as given', () => {
  it('with NUL, a lone surrogate, % or an escape look-alike are distinct turns and sessions, kept exactly, repaired and closed', async () => {
    const schema = pg.schema();
    // Pairs a naive column would merge (U+FFFD for both surrogates) or refuse (NUL), and ids that look like the escape.
    const ids = ['a\ud800', 'a\udbff', 'a\ufffd', 'n\0', 'n%u0000', '100%', '100%25', 'plain'];
    const crashed = await open(schema, 'owner\0\ud800', { closeWaitMs: 0 });
    for (const id of ids) {
      await crashed.append({ sessionId: `s-${id}`, turnId: `t-${id}`, type: 'turn_started' });
      await crashed.append({ sessionId: `s-${id}`, turnId: `t-${id}`, type: 'tool_call', callId: 'c', name: 'n', args: {} });
    }
    const reader = await open(schema, 'reader');
    for (const id of ids) {
      const own = await reader.entries({ sessionId: `s-${id}` });
      expect(own.map((e) => [e.sessionId, e.turnId, e.type])).toEqual([[`s-${id}`, `t-${id}`, 'turn_started'], [`s-${id}`, `t-${id}`, 'tool_call']]);
      expect(await reader.entries({ turnId: `t-${id}` })).toEqual(own);
    }
    // A used id is still refused, by its exact self only.
    await expect(reader.append({ sessionId: 'x', turnId: 't-a\ud800', type: 'turn_started' })).rejects.toBeInstanceOf(TurnIdUsedError);
    // A sweep closes one of them, and only it.
    expect(await reader.closeAbandonedTurn('s-a\udbff', 't-a\udbff', 'lease.expired')).toBe(true);
    expect(await reader.closeAbandonedTurn('s-a\ud800', 't-a\udbff')).toBe(false); // of another session
    expect((await reader.entries({ turnId: 't-a\ud800' })).map(typeOf)).toEqual(['turn_started', 'tool_call']);
    // The owner restarts under its own (escaped) instance id and closes the rest, each under its exact ids.
    const restarted = await open(schema, 'owner\0\ud800');
    for (const id of ids) {
      const history = await restarted.entries({ sessionId: `s-${id}` });
      expect(history.every((e) => e.sessionId === `s-${id}` && e.turnId === `t-${id}`)).toBe(true);
      expect(history.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
      expect(history[3]).toMatchObject({ reason: id === 'a\udbff' ? 'lease.expired' : 'restart' });
    }
    await Promise.all([crashed.close(), reader.close(), restarted.close()]);
  });
});

describe('one batch decides as the rows would one by one', () => {
  // A batch of up to 16 rows is written row by row, a larger one as one set statement: both must decide alike.
  for (const filler of [0, 40]) {
    it(`with ${filler + 5} rows in the transaction: a start, an end and what follows it, a second start, a used id`, async () => {
      const schema = pg.schema();
      const ledger = await open(schema, 'A');
      await ledger.append({ sessionId: 'old', turnId: 'old', type: 'turn_started' });
      const before = pgLedgerHooks(ledger)!.transactions;
      const results = await Promise.allSettled([
        ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' }),
        ...Array.from({ length: filler }, (_, i) => ledger.append({ sessionId: `f${i}`, turnId: `f${i}`, type: 'turn_started' })),
        ledger.append({ sessionId: 's', turnId: 't', type: 'status', status: 'completed' }),
        ledger.append({ sessionId: 's', turnId: 't', type: 'status', status: 'failed', reason: 'after the end' }),
        ledger.append({ sessionId: 's2', turnId: 't', type: 'turn_started' }),
        ledger.append({ sessionId: 's3', turnId: 'old', type: 'turn_started' }),
      ]);
      expect(pgLedgerHooks(ledger)!.transactions - before).toBe(1);
      const tail = results.slice(filler + 1).map((r) => (r.status === 'fulfilled' ? 'ok' : (r.reason as Error).name));
      expect([results[0]!.status, ...tail]).toEqual(['fulfilled', 'ok', 'TurnEndedError', 'TurnIdUsedError', 'TurnIdUsedError']);
      expect((await ledger.entries({ turnId: 't' })).map(typeOf)).toEqual(['turn_started', 'status:completed']);
      const all = await ledger.entries();
      expect(new Set(all.map((e) => e.seq)).size).toBe(all.length);
      // The batch's new turn was recorded, used and ended, whatever turn came before it in the batch.
      await expect(ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' })).rejects.toThrow(TurnIdUsedError);
      await expect(ledger.append({ sessionId: 's', turnId: 't', type: 'status', status: 'failed', reason: 'late' })).rejects.toThrow(/has ended/);
      await ledger.close();
    });
  }

  it('a few rows of a running turn and of a new one that ends: each turn moves by its own rows only', async () => {
    const schema = pg.schema();
    const ledger = await open(schema, 'A');
    await ledger.append({ sessionId: 'k', turnId: 'k', type: 'turn_started' });
    const before = pgLedgerHooks(ledger)!.transactions;
    await Promise.all([
      ledger.append({ sessionId: 'k', turnId: 'k', type: 'say', text: 'still running' }),
      ledger.append({ sessionId: 'n', turnId: 'n', type: 'turn_started' }),
      ledger.append({ sessionId: 'n', turnId: 'n', type: 'status', status: 'cancelling', reason: 'cancel.user' }),
      ledger.append({ sessionId: 'n', turnId: 'n', type: 'status', status: 'cancelled', reason: 'cancel.user' }),
    ]);
    expect(pgLedgerHooks(ledger)!.transactions - before).toBe(1);
    const { rows } = await pg.pool().query(`SELECT turn_id, cancelling, end_seq IS NOT NULL AS ended, status FROM "${schema}".turns ORDER BY turn_id`);
    expect(rows).toEqual([
      { turn_id: 'k', cancelling: false, ended: false, status: null },
      { turn_id: 'n', cancelling: true, ended: true, status: 'cancelled' },
    ]);
    await ledger.append({ sessionId: 'k', turnId: 'k', type: 'say', text: 'goes on' });
    await ledger.close();
  });
});

describe('repair', () => {
  it('open closes the unfinished turns of its own instanceId and leaves a live instance\'s turns alone', async () => {
    const schema = pg.schema();
    // closeWaitMs 0: the crashed process never closes (its close here is cleanup), so it waits for no stop.
    const [crashed, live] = [await open(schema, 'crashing', { closeWaitMs: 0 }), await open(schema, 'live')];
    await crashed.append({ sessionId: 's1', turnId: 'plain', type: 'turn_started' });
    await crashed.append({ sessionId: 's1', turnId: 'plain', type: 'tool_call', callId: 'c1', name: 'n', args: {} });
    await crashed.append({ sessionId: 's2', turnId: 'stopping', type: 'turn_started' });
    await crashed.append({ sessionId: 's2', turnId: 'stopping', type: 'tool_call', callId: 'c2', name: 'n', args: {} });
    await crashed.append({ sessionId: 's2', turnId: 'stopping', type: 'status', status: 'cancelling', reason: 'cancel.user' });
    await crashed.append({ sessionId: 's3', turnId: 'done', type: 'turn_started' });
    await crashed.append({ sessionId: 's3', turnId: 'done', type: 'status', status: 'completed' });
    await live.append({ sessionId: 's4', turnId: 'running', type: 'turn_started' });
    // The crashed process never closes its ledger; its successor opens under the same instanceId.
    const restarted = await open(schema, 'crashing');
    const plain = await restarted.entries({ turnId: 'plain' });
    expect(plain.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
    expect(plain[2]).toMatchObject({ callId: 'c1', output: INTERRUPTED_TOOL_TEXT });
    expect(plain[3]).toMatchObject({ reason: 'restart' });
    const stopping = await restarted.entries({ turnId: 'stopping' });
    expect(stopping.map(typeOf)).toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    expect(stopping[4]).toMatchObject({ text: TURN_ABORTED_MARKER });
    expect(stopping[5]).toMatchObject({ reason: 'cancel.user' });
    expect((await restarted.entries({ turnId: 'done' })).map(typeOf)).toEqual(['turn_started', 'status:completed']);
    expect((await restarted.entries({ turnId: 'running' })).map(typeOf)).toEqual(['turn_started']);
    await live.append({ sessionId: 's4', turnId: 'running', type: 'say', text: 'still mine' });
    await Promise.all([crashed.close(), live.close(), restarted.close()]);
  });

  it('a second open of an instanceId still open on the same pool and schema is refused, and the first one\'s live turns stay open', async () => {
    const schema = pg.schema();
    const pool = pg.pool();
    const first = await PgLedger.open({ pool, schema, instanceId: 'web-1' });
    await first.append({ sessionId: 's', turnId: 'live', type: 'turn_started' });
    // Two runners of one process, or a module evaluated twice, given one name: the second open would take the first's live turns for a crash's.
    await expect(PgLedger.open({ pool, schema, instanceId: 'web-1' }))
      .rejects.toThrow(/PgLedger\.open: instanceId "web-1" is already open on this pool in postgres schema "t_ledger_\w+"/);
    await first.append({ sessionId: 's', turnId: 'live', type: 'say', text: 'still mine' });
    expect((await first.entries({ turnId: 'live' })).map(typeOf)).toEqual(['turn_started', 'say']);
    // Another name, or another schema, on the same pool opens.
    const other = await PgLedger.open({ pool, schema, instanceId: 'web-2' });
    const elsewhere = await PgLedger.open({ pool, schema: pg.schema(), instanceId: 'web-1' });
    await Promise.all([other.close(), elsewhere.close()]);
    // Once the first is closed, the name opens again: a restart, which closes what the first left open.
    await first.close();
    const restarted = await PgLedger.open({ pool, schema, instanceId: 'web-1' });
    expect((await restarted.entries({ turnId: 'live' })).map(typeOf)).toEqual(['turn_started', 'say', 'status:interrupted']);
    await restarted.close();
    // An open that failed takes no name.
    const down = { connect: () => Promise.reject(new Error('connection refused')) };
    for (let i = 0; i < 2; i++) await expect(PgLedger.open({ pool: down, schema, instanceId: 'web-1', timeoutMs: 100 })).rejects.toThrow(/connection refused/);
  });

  it('closeAbandonedTurn closes a dead owner\'s turn once, atomically: true the first time, false when ended, unknown or of another session', async () => {
    const schema = pg.schema();
    const [dead, sweeper, other] = [await open(schema, 'dead'), await open(schema, 'sweeper'), await open(schema, 'other')];
    await dead.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await dead.append({ sessionId: 's', turnId: 't', type: 'tool_call', callId: 'a', name: 'n', args: {} });
    await dead.append({ sessionId: 's', turnId: 't', type: 'tool_call', callId: 'b', name: 'n', args: {} });
    await dead.append({ sessionId: 's', turnId: 't', type: 'tool_output', callId: 'a', output: 1, success: true });
    await dead.flush(); // its streamed entries resolve once queued: committed before it "dies"
    expect(await sweeper.closeAbandonedTurn('other-session', 't')).toBe(false);
    expect(await sweeper.closeAbandonedTurn('s', 'unknown')).toBe(false);
    // Two instances sweep at once: one closes it.
    const closed = await Promise.all([sweeper.closeAbandonedTurn('s', 't'), other.closeAbandonedTurn('s', 't')]);
    expect(closed.sort()).toEqual([false, true]);
    expect(await sweeper.closeAbandonedTurn('s', 't')).toBe(false);
    const entries = await other.entries({ turnId: 't' });
    expect(entries.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_call', 'tool_output', 'tool_aborted', 'status:interrupted']);
    expect(entries[4]).toMatchObject({ callId: 'b', output: INTERRUPTED_TOOL_TEXT });
    expect(entries[5]).toMatchObject({ reason: 'restart' }); // the default reason
    // The owner waking up late writes nothing more of it.
    await dead.append({ sessionId: 's', turnId: 't', type: 'tool_output', callId: 'b', output: 2, success: true }); // queued
    await expect(dead.flush()).rejects.toThrow(/has ended/);
    await expect(sweeper.closeAbandonedTurn('', 't')).rejects.toThrow(TypeError);
    await Promise.all([dead.close(), sweeper.close(), other.close()]);
  });

  it('closeAbandonedTurn records the reason it is given on interrupted; a recorded stop keeps its own on cancelled', async () => {
    const schema = pg.schema();
    const [dead, sweeper] = [await open(schema, 'dead', { closeWaitMs: 0 }), await open(schema, 'sweeper')];
    await dead.append({ sessionId: 's', turnId: 'plain', type: 'turn_started' });
    await dead.append({ sessionId: 's', turnId: 'stopping', type: 'turn_started' });
    await dead.append({ sessionId: 's', turnId: 'stopping', type: 'status', status: 'cancelling', reason: 'cancel.user' });
    await expect(sweeper.closeAbandonedTurn('s', 'plain', '')).rejects.toThrow(/closeAbandonedTurn: reason/);
    await expect(sweeper.closeAbandonedTurn('s', 'plain', 'r'.repeat(1025))).rejects.toThrow(RangeError);
    await expect(sweeper.closeAbandonedTurn('s', 'plain', 7 as never)).rejects.toThrow(TypeError);
    expect((await sweeper.entries({ turnId: 'plain' })).map(typeOf)).toEqual(['turn_started']); // nothing written by a refused call
    expect(await sweeper.closeAbandonedTurn('s', 'plain', 'lease.expired')).toBe(true);
    expect(await sweeper.closeAbandonedTurn('s', 'stopping', 'lease.expired')).toBe(true);
    expect((await sweeper.entries({ turnId: 'plain' })).at(-1)).toMatchObject({ type: 'status', status: 'interrupted', reason: 'lease.expired' });
    expect((await sweeper.entries({ turnId: 'stopping' })).at(-1)).toMatchObject({ type: 'status', status: 'cancelled', reason: 'cancel.user' });
    await Promise.all([dead.close(), sweeper.close()]);
  });
});

describe('close', () => {
  it('waits for the appends under way, then refuses appends; the caller\'s pool stays usable', async () => {
    const schema = pg.schema();
    const pool = pg.pool();
    const ledger = await PgLedger.open({ pool, schema, instanceId: 'A' });
    const appends = Array.from({ length: 50 }, (_, i) => ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'turn_started' }));
    const closed = ledger.close();
    await expect(ledger.append({ sessionId: 's', turnId: 'late', type: 'turn_started' })).rejects.toThrow(/closed/);
    await closed;
    await Promise.all(appends); // every one committed by the time close resolved
    expect(ledger.close()).toBe(closed);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}".entries`);
    expect(rows[0].n).toBe(50);
    expect(pool.totalCount).toBeGreaterThan(0);
  });
});

describe('retention', () => {
  it('docs/postgres.md\'s DELETE removes ended turns\' entries only; seq goes up, ended ids stay used, open turns stay whole', async () => {
    const schema = pg.schema();
    const pool = pg.pool();
    const ledger = await PgLedger.open({ pool, schema, instanceId: 'A' });
    for (const turnId of ['old1', 'old2']) {
      await ledger.append({ sessionId: 's', turnId, type: 'turn_started' });
      await ledger.append({ sessionId: 's', turnId, type: 'say', text: 'x' });
      await ledger.append({ sessionId: 's', turnId, type: 'status', status: 'completed' });
    }
    await ledger.append({ sessionId: 's2', turnId: 'open', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 'last', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 'last', type: 'status', status: 'completed' });
    const top = (await ledger.entries()).at(-1)!.seq;

    // The statement as docs/postgres.md gives it, with the schema and a cutoff of now.
    const { rowCount } = await pool.query(`
      DELETE FROM "${schema}".entries e
       USING "${schema}".turns t, "${schema}".entries last
       WHERE e.turn_id = t.turn_id
         AND last.seq = t.end_seq
         AND last.at < $1`, [Date.now() + 1]);
    // old1, old2 and 'last', every entry of them.
    expect(rowCount).toBe(8);
    expect((await ledger.entries()).map((e) => `${e.turnId}:${typeOf(e)}`)).toEqual(['open:turn_started']);

    await ledger.append({ sessionId: 's', turnId: 'new', type: 'turn_started' });
    expect((await ledger.entries({ turnId: 'new' }))[0]!.seq).toBeGreaterThan(top);
    await expect(ledger.append({ sessionId: 's', turnId: 'old1', type: 'turn_started' })).rejects.toBeInstanceOf(TurnIdUsedError);
    await expect(ledger.append({ sessionId: 's', turnId: 'old2', type: 'status', status: 'failed', reason: 'late' })).rejects.toThrow(/has ended/);
    await ledger.close();
  });
});

describe('the optional peer', () => {
  it('neither "fullstop" nor "fullstop/postgres" loads pg: the ledger uses the pool it is given', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-pg-peer-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'hooks.mjs'), 'export async function resolve(s, c, next) { if (s === "pg" || s.startsWith("pg/")) throw new Error(`refused ${s}`); return next(s, c); }\n');
    writeFileSync(join(dir, 'register.mjs'), 'import { register } from "node:module"; register("./hooks.mjs", import.meta.url);\n');
    const load = (module: string) => new Promise<{ code: number; out: string }>((resolve) => {
      const url = new URL(`../dist/src/${module}`, import.meta.url).href;
      execFile(process.execPath, ['--import', join(dir, 'register.mjs'), '--input-type=module', '-e', `await import(${JSON.stringify(url)}); await import("pg").catch((e) => console.log(e.message)); console.log('loaded')`],
        (error, stdout, stderr) => resolve({ code: error === null ? 0 : (error.code as number), out: stdout + stderr }));
    });
    // The hook works (an import of pg is refused), and neither entry point asks for it.
    expect(await load('index.js')).toEqual({ code: 0, out: 'refused pg\nloaded\n' });
    expect(await load('ledger/postgres/index.js')).toEqual({ code: 0, out: 'refused pg\nloaded\n' });
  });
});
