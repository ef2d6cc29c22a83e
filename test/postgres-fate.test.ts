/**
 * A row's fate is its own (issue 49, item 3): one session's entry the database (or V8) cannot take
 * never fails another session's, least of all a stop's intent; a lock wait the client gave up on
 * ends on the server, so nothing reported failed commits later; a statement the server cancels
 * does not lose a storm's histories.
 */
import { describe, expect, it } from 'vitest';
import pgLib from 'pg';
import { LedgerTimeoutError, TurnRegistry, TurnRunner, type LedgerEntry, type Turn } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgLedgerHooks } from '../dist/src/ledger/postgres/pg-ledger-hooks.js';
import { untilStopped } from '../dist/bench/turns.js';
import { PG, pgScene } from './support/pg.js';

const pg = pgScene('fate');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);
/** 1,024 distinct CJK characters: 3,072 bytes that do not compress (PostgreSQL compresses a repeated one below its index limit). */
const CJK_1024 = Array.from({ length: 1024 }, (_, i) => String.fromCharCode(0x4e00 + i * 7)).join('');
const STOPPED = ['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled'];

/** A runner on `ledger` with a turn of `sessionId` waiting in a tool for its stop; resolves once that tool runs and its entries are committed. */
async function waitingTurn(ledger: PgLedger, registry: TurnRegistry, sessionId: string) {
  const runner = new TurnRunner({ registry, ledger, graceMs: 50 });
  let running!: () => void;
  const ran = new Promise<void>((r) => { running = r; });
  const outcome = runner.run(sessionId, (turn: Turn) => turn.tool('wait', {}, () => { running(); return untilStopped(turn.signal); }), { turnId: `t-${sessionId}` });
  await ran;
  await ledger.flush();
  return { runner, outcome };
}

describe('sizes PostgreSQL cannot take are refused before batching', () => {
  it('a turn id of 1,024 CJK characters (3 KB, past the 2,704-byte index row) batched with another session\'s stop: refused alone, the stop\'s intent kept', async () => {
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const registry = new TurnRegistry();
    const { runner, outcome } = await waitingTurn(ledger, registry, 'victim');
    // In one synchronous run: the same transaction, if both were queued.
    const bad = ledger.append({ sessionId: 'other', turnId: CJK_1024, type: 'turn_started' });
    const stopping = runner.stop('victim');
    await expect(bad).rejects.toThrow(RangeError);
    await expect(bad).rejects.toThrow(/entry\.turnId: at most 2000 bytes/);
    const report = await stopping;
    expect(report?.ledgerError).toBeUndefined();
    expect((await outcome).status).toBe('cancelled');
    expect((await ledger.entries({ sessionId: 'victim' })).map(typeOf)).toEqual(STOPPED);
    await ledger.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });

  it('an instanceId of 1,024 CJK characters is refused at open with a RangeError naming it', async () => {
    const opening = PgLedger.open({ pool: pg.pool(), schema: pg.schema(), instanceId: CJK_1024 });
    await expect(opening).rejects.toThrow(RangeError);
    await expect(opening).rejects.toThrow(/options\.instanceId: at most 2000 bytes/);
  });
});

describe('a big entry never holds another session\'s stop', () => {
  it('a 30 M-character say batched with another session\'s stop: the intent commits within intentTimeoutMs, both are written', async () => {
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const registry = new TurnRegistry();
    const { runner, outcome } = await waitingTurn(ledger, registry, 'victim');
    await ledger.append({ sessionId: 'big', turnId: 'big', type: 'turn_started' });
    const text = 'x'.repeat(30_000_000);
    const big = ledger.append({ sessionId: 'big', turnId: 'big', type: 'say', text });
    const report = await runner.stop('victim');
    await big;
    expect(report?.ledgerError).toBeUndefined(); // the intent was confirmed within intentTimeoutMs (1 s)
    expect((await outcome).status).toBe('cancelled');
    await ledger.flush();
    expect((await ledger.entries({ sessionId: 'victim' })).map(typeOf)).toEqual(STOPPED);
    const { rows } = await pg.pool().query(`SELECT length(body::text) AS n FROM "${schema}".entries WHERE session_id = 'big' AND type = 'say'`);
    expect(Number(rows[0].n)).toBeGreaterThan(30_000_000);
    await ledger.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  }, 60_000);
});

describe('a wait abandoned is a statement ended', () => {
  it('a SELECT … FOR UPDATE held on one turns row: other sessions\' appends commit; the blocked one fails in time and never commits later', async () => {
    const schema = pg.schema();
    const app = `fullstop_fate_${process.pid}`;
    const ledger = await PgLedger.open({ pool: pg.pool(PG.port, { application_name: app, max: 4 }), schema, instanceId: 'A', timeoutMs: 1500 });
    await ledger.append({ sessionId: 'blocked', turnId: 'blocked', type: 'turn_started' });
    const admin = await pg.pool(PG.port, { max: 1 }).connect();
    try {
      await admin.query('BEGIN');
      await admin.query(`SELECT * FROM "${schema}".turns WHERE turn_id = 'blocked' FOR UPDATE`);
      const blocked = ledger.append({ sessionId: 'blocked', turnId: 'blocked', type: 'status', status: 'completed' });
      const others = Array.from({ length: 50 }, (_, i) => ledger.append({ sessionId: `s${i}`, turnId: `t${i}`, type: 'turn_started' }));
      // Committed while the row is still held (the blocked append has not even failed yet).
      const settledFirst = await Promise.race([Promise.all(others).then(() => 'others'), blocked.then(() => 'blocked', () => 'blocked')]);
      expect(settledFirst).toBe('others');
      await expect(blocked).rejects.toThrow(LedgerTimeoutError);
      await admin.query('COMMIT');
      // Nothing of ours is left running on the server, and the refused end was not written.
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`, [app]);
      expect(rows[0].n).toBe(0);
      const probe = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'probe' });
      expect((await probe.entries({ sessionId: 'blocked' })).map(typeOf)).toEqual(['turn_started']);
      expect(await probe.entries()).toHaveLength(51);
      await probe.close();
    } finally {
      admin.release();
      await ledger.close();
    }
  });

  it('a statement_timeout that cancels the storm\'s statement does not lose its histories (the batch is sent again in halves)', async () => {
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(PG.port, { options: '-c statement_timeout=40' }), schema, instanceId: 'A', timeoutMs: 20_000 });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger, graceMs: 1000 });
    const STORM = 1000;
    const sessions = Array.from({ length: STORM }, (_, i) => `s${i}`);
    let ran = 0;
    let allRunning!: () => void;
    const running = new Promise<void>((r) => { allRunning = r; });
    const outcomes = sessions.map((s) => runner.run(s, (turn: Turn) => turn.tool('wait', {}, () => { if (++ran === STORM) allRunning(); return untilStopped(turn.signal); }), { turnId: `t-${s}` }));
    await running;
    await ledger.flush();
    const reports = await Promise.all(sessions.map((s) => runner.stop(s)));
    expect(reports.filter((r) => r?.ledgerError !== undefined).map((r) => String(r?.ledgerError))).toEqual([]);
    expect(new Set((await Promise.all(outcomes)).map((o) => o.status))).toEqual(new Set(['cancelled']));
    const entries = await ledger.entries();
    const byTurn = new Map<string, string[]>();
    for (const e of entries) (byTurn.get(e.turnId) ?? byTurn.set(e.turnId, []).get(e.turnId)!).push(typeOf(e));
    expect(byTurn.size).toBe(STORM);
    for (const types of byTurn.values()) expect(types).toEqual(STOPPED);
    await ledger.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  }, 120_000);
});

describe('re-sends go on while timeoutMs lasts', () => {
  it('an append whose backend the server ends four times in a row is sent a fifth time and written once', async () => {
    const schema = pg.schema();
    const app = `fullstop_resend_${process.pid}`;
    const ledger = await PgLedger.open({ pool: pg.pool(PG.port, { application_name: app }), schema, instanceId: 'A', timeoutMs: 20_000 });
    const held = await pg.pool(PG.port, { max: 1 }).connect();
    try {
      // The append waits for the entries table, locked here; its backend is ended while it waits.
      await held.query('BEGIN');
      await held.query(`LOCK TABLE "${schema}".entries IN ACCESS EXCLUSIVE MODE`);
      const before = pgLedgerHooks(ledger)!.transactions;
      const append = ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
      let failed: unknown;
      append.catch((error: unknown) => { failed = error; });
      const ended: number[] = [];
      while (ended.length < 4 && failed === undefined) {
        // Inside a transaction the activity view is a snapshot: cleared to see the re-sent call.
        await held.query('SELECT pg_stat_clear_snapshot()');
        const { rows } = await held.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = $2 AND NOT (pid = ANY($3))',
          [app, 'Lock', ended]);
        if (rows[0] === undefined) continue;
        await held.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
        ended.push(rows[0].pid);
      }
      await held.query('ROLLBACK');
      expect(failed).toBeUndefined();
      await append;
      expect(pgLedgerHooks(ledger)!.transactions - before).toBe(5);
      expect((await ledger.entries({ sessionId: 's' })).map(typeOf)).toEqual(['turn_started']);
    } finally {
      held.release();
      await ledger.close();
    }
  }, 60_000);
});
