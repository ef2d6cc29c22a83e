/**
 * A turn belongs to its session and its owner (issue 49, item 4): on one schema, instance B can
 * neither start a turn id instance A is running (in any session) nor write into it, also when a
 * stop of B's begins in the same step; an entry whose session is not its turn's is refused; the
 * repairs (`closeAbandonedTurn`) still close another instance's turn.
 */
import { describe, expect, it } from 'vitest';
import { TurnIdUsedError, TurnRegistry, TurnRunner, type LedgerEntry, type Turn } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgScene } from './support/pg.js';

const pg = pgScene('owner');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);
const open = (schema: string, instanceId: string) => PgLedger.open({ pool: pg.pool(), schema, instanceId });

describe('a turn id another instance is running', () => {
  for (const sameSession of [true, false]) {
    it(`B runs it ${sameSession ? 'in the same session' : 'in another session'} with a stop at once: B's run is refused, nothing of B is written into A's turn, A's turn goes on`, async () => {
      const schema = pg.schema();
      const [a, b] = [await open(schema, 'A'), await open(schema, 'B')];
      // Two instances: a registry each.
      const [registryA, registryB] = [new TurnRegistry(), new TurnRegistry()];
      const [onA, onB] = [new TurnRunner({ registry: registryA, ledger: a, graceMs: 50 }), new TurnRunner({ registry: registryB, ledger: b, graceMs: 50 })];
      let release!: () => void;
      const released = new Promise<void>((r) => { release = r; });
      let started!: () => void;
      const running = new Promise<void>((r) => { started = r; });
      const outcomeA = onA.run('s-a', async (turn: Turn) => { started(); await released; await turn.say('still mine'); return 'done'; }, { turnId: 'T' });
      await running;
      // B: a stop kept for turn T (B's ledger does not know it), then T run in B: the stop begins in the same step.
      const sessionB = sameSession ? 's-a' : 's-b';
      expect(onB.requestStop(sessionB, { turnId: 'T' }).outcome).toBe('pending');
      let bodyRan = false;
      const outcomeB = onB.run(sessionB, async () => { bodyRan = true; }, { turnId: 'T' });
      await expect(outcomeB).rejects.toBeInstanceOf(TurnIdUsedError);
      expect(bodyRan).toBe(false);
      release();
      expect(await outcomeA).toMatchObject({ status: 'completed', value: 'done' });
      const history = await b.entries({ turnId: 'T' });
      expect(history.map(typeOf)).toEqual(['turn_started', 'say', 'status:completed']);
      expect(history.every((e) => e.sessionId === 's-a')).toBe(true);
      const t0 = performance.now();
      await Promise.all([a.close(), b.close()]);
      expect(performance.now() - t0).toBeLessThan(5000); // B's refused stop is no stop under way for close to wait on (closeWaitMs: 10 s)
      for (const registry of [registryA, registryB]) expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    });
  }
});

describe('the database refuses', () => {
  it('an entry whose session is not its turn\'s, and an entry of a turn another instance owns; a repair still closes it', async () => {
    const schema = pg.schema();
    const [a, b] = [await open(schema, 'A'), await open(schema, 'B')];
    await a.append({ sessionId: 's1', turnId: 't1', type: 'turn_started' });
    // Another session's entry for t1, from its owner and from another instance.
    await expect(a.append({ sessionId: 's2', turnId: 't1', type: 'status', status: 'cancelling', reason: 'x' })).rejects.toBeInstanceOf(TurnIdUsedError);
    await expect(b.append({ sessionId: 's2', turnId: 't1', type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/another session/);
    // The right session, but B does not own t1.
    await expect(b.append({ sessionId: 's1', turnId: 't1', type: 'status', status: 'cancelling', reason: 'x' })).rejects.toThrow(/another instance/);
    const refused = await b.append({ sessionId: 's1', turnId: 't1', type: 'status', status: 'cancelled', reason: 'x' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'ERR_FULLSTOP_TURN_ID_USED', turnId: 't1' });
    // A say (queued) refused later: the flush rejects, and the session's history has none of it.
    await b.append({ sessionId: 's1', turnId: 't1', type: 'say', text: 'not mine' });
    await expect(b.flush()).rejects.toBeInstanceOf(TurnIdUsedError);
    // Within one batch too: a new turn's rows of a second session are refused, the first session's kept.
    const batch = await Promise.allSettled([
      a.append({ sessionId: 's3', turnId: 't3', type: 'turn_started' }),
      a.append({ sessionId: 's4', turnId: 't3', type: 'status', status: 'completed' }),
      a.append({ sessionId: 's3', turnId: 't3', type: 'status', status: 'completed' }),
    ]);
    expect(batch.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((await a.entries({ sessionId: 's1' })).map(typeOf)).toEqual(['turn_started']);
    expect(await a.entries({ sessionId: 's2' })).toEqual([]);
    expect(await a.entries({ sessionId: 's4' })).toEqual([]);
    // The repair of a dead owner's turn is written by whoever sweeps.
    expect(await b.closeAbandonedTurn('s1', 't1', 'lease.expired')).toBe(true);
    expect((await a.entries({ sessionId: 's1' })).map(typeOf)).toEqual(['turn_started', 'status:interrupted']);
    await Promise.all([a.close(), b.close()]);
  });
});
