/**
 * The stop order holds across instances on `PgLedger`: a `TurnRunner` on instance A (its link to
 * the database slowed by a proxy, so a flush that resolved before the commit would be seen), a
 * reader on instance B. And group commit: a storm of 1,000 stops on one instance commits in at
 * most 100 transactions, each stop's entries in order.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CancelledError, TurnIdUsedError, TurnRegistry, TurnRunner, type LedgerEntry, type Turn } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgLedgerHooks } from '../dist/src/ledger/postgres/pg-ledger-hooks.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { PG, pgScene } from './support/pg.js';

const pg = pgScene('stop');
const proxies: TcpProxy[] = [];
afterEach(async () => { await Promise.all(proxies.splice(0).map((p) => p.close())); });

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);

/** A tool that waits for the turn's signal, as a model stream does, and rejects once it aborts. */
const untilStopped = (signal: AbortSignal) => new Promise((_, reject) => {
  signal.addEventListener('abort', () => reject(new CancelledError('stream aborted', { reason: signal.reason })), { once: true });
});

/** Resolves once `n` calls of `tick` were made. */
function countdown(n: number): { tick: () => void; done: Promise<void> } {
  let left = n;
  let resolve!: () => void;
  const done = new Promise<void>((r) => { resolve = r; });
  return { tick: () => { if (--left === 0) resolve(); }, done };
}

describe('the stop order across instances', () => {
  it('when the signal fires B already reads cancelling; when turn_aborted fires B reads every tool_aborted, the marker and cancelled', async () => {
    const proxy = await TcpProxy.start(PG.port);
    proxies.push(proxy);
    proxy.latencyMs = 150; // A's every statement reaches the database 150 ms after it is sent
    const schema = pg.schema();
    const a = await PgLedger.open({ pool: pg.pool(proxy.port), schema, instanceId: 'A' });
    const b = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'B' });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger: a, graceMs: 50 });
    let atSignal: Promise<LedgerEntry[]> | undefined;
    let atEvent: Promise<LedgerEntry[]> | undefined;
    runner.on('turn_aborted', () => { atEvent = b.entries({ sessionId: 's' }); });
    const running = countdown(2);
    const outcome = runner.run('s', async (turn: Turn) => {
      turn.signal.addEventListener('abort', () => { atSignal = b.entries({ sessionId: 's' }); }, { once: true });
      await Promise.all([
        turn.tool('stream', {}, () => { running.tick(); return untilStopped(turn.signal); }),
        turn.tool('stuck', {}, () => { running.tick(); return new Promise(() => {}); }),
      ]);
    }, { turnId: 't' });
    await running.done;
    await a.flush(); // the tool calls' entries (queued: a tool call waits for no commit)
    const before = pgLedgerHooks(a)!.transactions;
    const report = await runner.stop('s', { graceMs: 50 });
    expect(report?.ledgerError).toBeUndefined();
    expect(pgLedgerHooks(a)!.transactions - before).toBe(2); // the intent's, then the history's (both tool_aborted, marker, cancelled)
    expect((await outcome).status).toBe('cancelled');
    const seenAtSignal = (await atSignal!).map(typeOf);
    expect(seenAtSignal).toContain('status:cancelling');
    const seenAtEvent = (await atEvent!).map(typeOf);
    expect(seenAtEvent).toEqual(['turn_started', 'tool_call', 'tool_call', 'status:cancelling', 'tool_aborted', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    await a.close();
    await b.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});

describe('a turn id across instances', () => {
  it('run on instance B of a turn id instance A used rejects with TurnIdUsedError and runs nothing of its body', async () => {
    const schema = pg.schema();
    const [a, b] = [await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' }), await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'B' })];
    const registry = new TurnRegistry();
    const [onA, onB] = [new TurnRunner({ registry, ledger: a }), new TurnRunner({ registry, ledger: b })];
    expect((await onA.run('s', async () => 'done', { turnId: 'shared-id' })).status).toBe('completed');
    let ran = false;
    const refused = await onB.run('s', async () => { ran = true; }, { turnId: 'shared-id' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TurnIdUsedError);
    expect(ran).toBe(false);
    expect((await b.entries({ turnId: 'shared-id' })).map(typeOf)).toEqual(['turn_started', 'status:completed']);
    await a.close();
    await b.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});

describe('group commit', () => {
  it('1,000 concurrent stops on one instance commit in at most 100 transactions, each stop\'s entries in order', async () => {
    const STORM = 1000;
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger, graceMs: 5000 });
    const running = countdown(STORM);
    const sessions = Array.from({ length: STORM }, (_, i) => `s${i}`);
    const outcomes = sessions.map((s) => runner.run(s, (turn) => turn.tool('stream', {}, () => { running.tick(); return untilStopped(turn.signal); }), { turnId: `t-${s}` }));
    await running.done;
    await ledger.flush();
    const before = pgLedgerHooks(ledger)!.transactions;
    const reports = await Promise.all(sessions.map((s) => runner.stop(s)));
    const transactions = pgLedgerHooks(ledger)!.transactions - before;
    expect(reports.every((r) => r !== null && r.ledgerError === undefined)).toBe(true);
    expect(new Set((await Promise.all(outcomes)).map((o) => o.status))).toEqual(new Set(['cancelled']));
    expect(transactions).toBeLessThanOrEqual(100);
    expect(transactions).toBeGreaterThan(1);
    const entries = await ledger.entries();
    expect(entries).toHaveLength(STORM * 6);
    expect(new Set(entries.map((e) => e.seq)).size).toBe(entries.length); // unique (read in seq order)
    const byTurn = new Map<string, string[]>();
    for (const e of entries) (byTurn.get(e.turnId) ?? byTurn.set(e.turnId, []).get(e.turnId)!).push(typeOf(e));
    for (const types of byTurn.values()) {
      expect(types).toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    }
    await ledger.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  }, 60_000);
});
