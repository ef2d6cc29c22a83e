/**
 * `PgLedger`'s lanes (group-commit.ts invariants 1 and 2): a storm of stops across sessions goes
 * out as transactions side by side, a session's rows still commit in append order, and the
 * runner's own path (turn-append.ts) writes exactly what `append` writes.
 */
import { describe, expect, it } from 'vitest';
import type pgLib from 'pg';
import { TurnRegistry, TurnRunner, type LedgerEntry, type Turn } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { MAIN_LANES } from '../dist/src/ledger/postgres/group-commit.js';
import { turnAppends } from '../dist/src/ledger/turn-append.js';
import { untilStopped } from '../dist/bench/turns.js';
import { pgScene } from './support/pg.js';

const pg = pgScene('lanes');
const NO_LEAKS = { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 };

/** `pool`, counting the clients checked out at once (the ledger's transactions in flight). */
function counted(pool: pgLib.Pool): { pool: pgLib.Pool; most: () => number } {
  let out = 0;
  let most = 0;
  const connect = pool.connect.bind(pool) as () => Promise<pgLib.PoolClient>;
  const wrapped = Object.create(pool) as pgLib.Pool;
  wrapped.connect = (async () => {
    const client = await connect();
    most = Math.max(most, ++out);
    const release = client.release.bind(client);
    client.release = (destroy?: Error | boolean) => { out--; client.release = release; return release(destroy); };
    return client;
  }) as pgLib.Pool['connect'];
  return { pool: wrapped, most: () => most };
}

describe('a storm across sessions', () => {
  it(`goes out as up to ${MAIN_LANES} transactions at once, and every stop's history is whole`, async () => {
    const { pool, most } = counted(pg.pool(undefined, { max: 10 }));
    const ledger = await PgLedger.open({ pool, schema: pg.schema(), instanceId: 'A' });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger, graceMs: 5000 });
    const n = 300;
    let running = 0;
    let allRunning!: () => void;
    const ran = new Promise<void>((r) => { allRunning = r; });
    const outcomes = Array.from({ length: n }, (_, i) => runner.run(`s${i}`, (turn: Turn) => turn.tool('wait', {}, () => {
      if (++running === n) allRunning();
      return untilStopped(turn.signal);
    })));
    await ran;
    await ledger.flush();
    const reports = await Promise.all(Array.from({ length: n }, (_, i) => runner.stop(`s${i}`)));
    expect(reports.every((r) => r !== null && r.ledgerError === undefined)).toBe(true);
    expect(new Set((await Promise.all(outcomes)).map((o) => o.status))).toEqual(new Set(['cancelled']));
    expect(most()).toBeGreaterThanOrEqual(2);
    expect(most()).toBeLessThanOrEqual(MAIN_LANES + 1); // the lanes and the big one
    const types = (await ledger.entries({ sessionId: 's7' })).map((e) => (e.type === 'status' ? `status:${e.status}` : e.type));
    expect(types).toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    await ledger.close();
    expect(registry.stats()).toEqual(NO_LEAKS);
  });

  it('keeps each session\'s rows in append order while its rows and others\' share the lanes', async () => {
    const ledger = await PgLedger.open({ pool: pg.pool(), schema: pg.schema(), instanceId: 'A' });
    const sessions = 12;
    await Promise.all(Array.from({ length: sessions }, (_, s) => ledger.append({ sessionId: `s${s}`, turnId: `t${s}`, type: 'turn_started' })));
    const sent = Array.from({ length: sessions }, () => [] as string[]);
    // Bursts of many sessions' rows, some awaited between, so batches of every size meet rows of sessions in flight.
    for (let burst = 0; burst < 40; burst++) {
      const appends: Promise<void>[] = [];
      for (let k = 0; k < 60; k++) {
        const s = (burst * 7 + k * 5 + (k >> 2)) % sessions;
        const text = `b${burst}k${k}`;
        sent[s]!.push(text);
        appends.push(ledger.append({ sessionId: `s${s}`, turnId: `t${s}`, type: 'say', text }));
      }
      if (burst % 3 === 0) await Promise.all(appends);
    }
    await ledger.flush();
    for (let s = 0; s < sessions; s++) {
      const says = (await ledger.entries({ sessionId: `s${s}` })).filter((e): e is LedgerEntry & { text: string } => e.type === 'say');
      expect(says.map((e) => e.text), `session s${s}`).toEqual(sent[s]);
    }
    await ledger.close();
  });
});

describe("the runner's own path", () => {
  it('writes the row append writes, byte for byte', async () => {
    const ledger = await PgLedger.open({ pool: pg.pool(), schema: pg.schema(), instanceId: 'A' });
    const bodies = [
      { type: 'turn_started', input: { text: 'héllo\u2028', n: [1, null] } },
      { type: 'tool_call', callId: 'c1', name: 'search', args: undefined },
      { type: 'tool_call', callId: 'c2', name: 'x', args: { q: '\u0000\ud800' } },
      { type: 'say', text: '\u{1F600} "quoted" \\ done' },
      { type: 'tool_aborted', callId: 'c2', output: 'aborted', partial: { output: 'so far', success: true } },
      { type: 'status', status: 'cancelling', reason: 'cancel.user', detail: 'why' },
      { type: 'turn_aborted', text: 'stopped', reason: 'cancel.user' },
      { type: 'status', status: 'cancelled', reason: 'cancel.user' },
    ] as const;
    const viaTurn = turnAppends(ledger)!('s-turn', 't-turn');
    for (const body of bodies) await viaTurn(body as never);
    for (const body of bodies) await ledger.append({ ...body, sessionId: 's-append', turnId: 't-append' } as never);
    const strip = (e: LedgerEntry) => JSON.stringify({ ...e, seq: 0, at: 0, sessionId: '', turnId: '' });
    const a = (await ledger.entries({ sessionId: 's-turn' })).map(strip);
    const b = (await ledger.entries({ sessionId: 's-append' })).map(strip);
    expect(a).toHaveLength(bodies.length);
    expect(a).toEqual(b);
    await ledger.close();
  });

  it('refuses what append refuses: a bad field, an id PostgreSQL cannot index (every entry of that turn), a closed ledger', async () => {
    const ledger = await PgLedger.open({ pool: pg.pool(), schema: pg.schema(), instanceId: 'A' });
    const appends = turnAppends(ledger)!;
    const write = appends('s', 't');
    await write({ type: 'turn_started' });
    await expect(write({ type: 'say', text: 5 } as never)).rejects.toThrow(/entry\.text: expected a string, got 5/);
    await expect(write({ type: 'nope' } as never)).rejects.toThrow(/entry\.type: expected one of/);
    const long = 'ü'.repeat(1024); // 2,048 bytes: inside MAX_ID_LENGTH, over MAX_PG_ID_BYTES
    const tooLong = appends('s', long);
    await expect(tooLong({ type: 'turn_started' })).rejects.toThrow(/entry\.turnId: at most 2000 bytes/);
    await expect(tooLong({ type: 'say', text: 'x' })).rejects.toThrow(RangeError);
    await expect(appends('', 't2')({ type: 'turn_started' })).rejects.toThrow(TypeError);
    await ledger.close();
    await expect(write({ type: 'say', text: 'late' })).rejects.toThrow(/closed/);
    expect((await PgLedger.open({ pool: pg.pool(), schema: ledger.schema, instanceId: 'B' }).then(async (b) => {
      const types = (await b.entries({ sessionId: 's' })).map((e) => e.type);
      await b.close();
      return types;
    }))).toEqual(['turn_started']); // nothing refused was written
  });
});
