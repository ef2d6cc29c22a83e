/**
 * `ShardedLedger`: sessions spread over several stores by session id. Each session's history is in
 * the one store its id routes to, complete and in the stop order; nothing of it in the others.
 * Tested on two file Ledgers and on two PostgreSQL databases (the second one made here with CREATE
 * DATABASE and dropped after).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import {
  LedgerTimeoutError, ShardedLedger, TurnRegistry, TurnRunner, type LedgerEntry, type LedgerEntryInput, type LedgerStore, type Turn,
} from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { routeOf } from '../dist/src/ledger/sharded-route.js';
import { dir, openLedger, useLedgerScratch } from './support/ledger-scratch.js';
import { PG, pgScene } from './support/pg.js';

useLedgerScratch('fullstop-sharded-');
const scene = pgScene('sharded');

/** Session ids, found in order, until each of `count` stores holds `each` of them. */
function sessionsPerStore(count: number, each: number): string[][] {
  const found: string[][] = Array.from({ length: count }, () => []);
  for (let i = 0; found.some((f) => f.length < each); i++) {
    const id = `session-${i}`;
    const position = routeOf(id, count);
    if (found[position]!.length < each) found[position]!.push(id);
  }
  return found;
}

/** A turn waiting in its tool for its stop; at the signal it reads the session's history (`atSignal`). */
function waitingTurn(history: () => Promise<LedgerEntry[]>, started: () => void, atSignal: (entries: Promise<LedgerEntry[]>) => void) {
  return (turn: Turn) => turn.tool('search', { q: 'x' }, () => new Promise((_, reject) => {
    turn.signal.addEventListener('abort', () => {
      atSignal(history());
      reject(turn.signal.reason);
    }, { once: true });
    started();
  }));
}

/** Runs one turn in each session on `ledger`, stops them all, and checks each store. */
async function stopEverywhere(ledger: ShardedLedger, sessions: string[][]): Promise<void> {
  const registry = new TurnRegistry();
  const runner = new TurnRunner({ registry, ledger, graceMs: 5000 });
  const all = sessions.flat();
  const seen = new Map<string, Promise<LedgerEntry[]>>();
  let running = 0;
  let allRunning!: () => void;
  const ready = new Promise<void>((r) => { allRunning = r; });
  const outcomes = all.map((s) => runner.run(s, waitingTurn(() => ledger.entries({ sessionId: s }), () => { if (++running === all.length) allRunning(); },
    (entries) => seen.set(s, entries)), { turnId: `turn-of-${s}` }));
  await ready;
  const reports = await Promise.all(all.map((s) => runner.stop(s)));
  expect(reports.every((r) => r !== null && r.ledgerError === undefined)).toBe(true);
  expect((await Promise.all(outcomes)).map((o) => o.status)).toEqual(all.map(() => 'cancelled'));
  sessions.forEach((own, position) => {
    for (const s of own) expect(ledger.storeOf(s)).toBe(ledger.stores[position]);
  });
  for (const [position, own] of sessions.entries()) {
    const store = ledger.stores[position]!;
    for (const s of own) {
      const entries = await store.entries({ sessionId: s });
      expect(entries.map((e) => (e.type === 'status' ? `status:${e.status}` : e.type))).toEqual(
        ['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
      expect(await ledger.entries({ sessionId: s })).toEqual(entries);
      // The intent was durable before the signal: the history read at the signal holds it.
      expect((await seen.get(s))!.map((e) => e.type === 'status' && e.status)).toContain('cancelling');
      for (const other of ledger.stores.filter((x) => x !== store)) expect(await other.entries({ sessionId: s })).toEqual([]);
    }
  }
  expect(registry.stats()).toMatchObject({ liveTokens: 0, liveSlots: 0, liveBridges: 0 });
}

describe('ShardedLedger', () => {
  it('on two file Ledgers: each session lands where its id routes, its history complete there in the stop order and absent from the other', async () => {
    const ledger = new ShardedLedger({ stores: [await openLedger(join(dir, 'a.jsonl')), await openLedger(join(dir, 'b.jsonl'))] });
    await stopEverywhere(ledger, sessionsPerStore(2, 4));
    await ledger.close();
    await expect(ledger.append({ sessionId: 'session-0', turnId: 'late', type: 'turn_started' } as LedgerEntryInput)).rejects.toThrow(/closed/);
  });

  it('routes by a hash that never changes: pinned ids, balance, and a store appended takes sessions only to itself', () => {
    expect(['s1', 'session-1', 'user:42/chat:7', 'chat-😀'.slice(0, 6)].map((id) => routeOf(id, 4))).toEqual(PINNED);
    const ids = Array.from({ length: 2000 }, (_, i) => `user-${i}`);
    const two = ids.map((id) => routeOf(id, 2));
    expect(two.filter((p) => p === 0).length).toBeGreaterThan(800);
    expect(two.filter((p) => p === 0).length).toBeLessThan(1200);
    const three = ids.map((id) => routeOf(id, 3));
    ids.forEach((_, i) => expect([two[i], 2]).toContain(three[i]));
    expect(three.filter((p) => p === 2).length).toBeGreaterThan(500);
    expect(three.filter((p) => p === 2).length).toBeLessThan(830);
  });

  it('refuses entries() without a session id, bad filters and bad stores, naming the field', async () => {
    const [a, b] = [await openLedger(join(dir, 'a.jsonl')), await openLedger(join(dir, 'b.jsonl'))];
    const ledger = new ShardedLedger({ stores: [a, b] });
    await expect(ledger.entries()).rejects.toThrow(TypeError);
    await expect(ledger.entries({ turnId: 't' })).rejects.toThrow(/ShardedLedger.entries: filter.sessionId: required/);
    await expect(ledger.entries({ sessionId: 's', limit: 0 })).rejects.toThrow(/ShardedLedger.entries: filter.limit/);
    await expect(ledger.append({ sessionId: 7 } as unknown as LedgerEntryInput)).rejects.toThrow(/ShardedLedger.append: entry.sessionId/);
    expect(() => new ShardedLedger({ stores: [] })).toThrow(RangeError);
    expect(() => new ShardedLedger({ stores: [a, {} as LedgerStore] })).toThrow(/options.stores\[1\]: expected a LedgerStore/);
    expect(() => new ShardedLedger({ stores: [a, b, a] })).toThrow(/options.stores\[2\]: the same store as options.stores\[0\]/);
    expect(ledger.intentTimeoutMs).toBe(a.intentTimeoutMs);
    expect(ledger.description).toMatch(/^sharded over 2 stores \(/);
  });

  it('a turn id is used once per store: two sessions in two stores may both use it; hasTurn asks every store', async () => {
    const ledger = new ShardedLedger({ stores: [await openLedger(join(dir, 'a.jsonl')), await openLedger(join(dir, 'b.jsonl'))] });
    const [[s0], [s1]] = sessionsPerStore(2, 1);
    await ledger.append({ sessionId: s0!, turnId: 'T', type: 'turn_started' } as LedgerEntryInput);
    expect(ledger.hasTurn('T')).toBe(true);
    await expect(ledger.append({ sessionId: s0!, turnId: 'T', type: 'turn_started' } as LedgerEntryInput)).rejects.toThrow(/T/);
    await ledger.append({ sessionId: s1!, turnId: 'T', type: 'turn_started' } as LedgerEntryInput);
    await ledger.flush();
    expect((await ledger.entries({ sessionId: s1! })).map((e) => e.turnId)).toEqual(['T']);
  });

  it('flush and close wait for every store, then reject with a store\'s own error (its code kept); a store never appended to is not flushed', async () => {
    const calls: string[] = [];
    const store = (name: string, fail?: Error): LedgerStore => ({
      append: async () => { calls.push(`${name}.append`); },
      flush: async () => { calls.push(`${name}.flush`); if (fail) throw fail; },
      entries: async () => [], hasTurn: () => false,
      close: async () => { await new Promise((r) => setTimeout(r, 50)); calls.push(`${name}.close`); if (fail) throw fail; },
    });
    const failure = new LedgerTimeoutError('no answer');
    const ledger = new ShardedLedger({ stores: [store('a', failure), store('b')] });
    await ledger.flush();
    expect(calls).toEqual([]);
    const [[s0], [s1]] = sessionsPerStore(2, 1);
    await ledger.append({ sessionId: s1!, turnId: 't', type: 'turn_started' } as LedgerEntryInput);
    await ledger.flush();
    await ledger.flush();
    expect(calls).toEqual(['b.append', 'b.flush']);
    await ledger.append({ sessionId: s0!, turnId: 'u', type: 'turn_started' } as LedgerEntryInput);
    await expect(ledger.flush()).rejects.toMatchObject({ code: 'ERR_FULLSTOP_LEDGER_TIMEOUT' });
    await expect(ledger.close()).rejects.toBe(failure);
    expect(calls.slice(-2).sort()).toEqual(['a.close', 'b.close']);
  });
});

describe('ShardedLedger on two PostgreSQL databases', () => {
  const databases: string[] = [];
  afterEach(async () => {
    const admin = new pg.Client(PG);
    await admin.connect();
    try {
      for (const name of databases.splice(0)) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  });

  it('each session\'s entries are in its own database, complete and in the stop order; the other database has none of them', async () => {
    const second = `test2_${randomBytes(5).toString('hex')}`;
    const admin = new pg.Client(PG);
    await admin.connect();
    await admin.query(`CREATE DATABASE "${second}"`).finally(() => admin.end());
    databases.push(second);
    const schema = scene.schema();
    const pools = [scene.pool(), scene.pool(PG.port, { database: second })];
    const stores = await Promise.all(pools.map((pool) => PgLedger.open({ pool, schema, instanceId: 'sharded' })));
    const ledger = new ShardedLedger({ stores });
    const sessions = sessionsPerStore(2, 3);
    await stopEverywhere(ledger, sessions);
    for (const [position, pool] of pools.entries()) {
      const { rows } = await pool.query(`SELECT DISTINCT session_id FROM "${schema}".entries ORDER BY 1`);
      expect(rows.map((r) => r.session_id)).toEqual([...sessions[position]!].sort());
    }
    await ledger.close();
    await pools[1]!.end();
  });
});

/** Where the pinned ids route among 4 stores: a change here moves every deployment's sessions. */
const PINNED = [1, 0, 2, 3];
