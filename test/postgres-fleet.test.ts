/**
 * A fleet on `PgLedger`: the owner of a turn (instance A, a process of its own) is SIGKILLed mid
 * tool call; a sweep on B or C marks its turn `interrupted` and closes its history in the shared
 * schema, so the next prompt built on any instance holds the call's output and the end. A live
 * instance's turn is untouched. On the shared Redis and the real PostgreSQL.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type LedgerEntry } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { INTERRUPTED_TOOL_TEXT } from '../dist/src/ledger/entry.js';
import { client, dropKeys, Host, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';
import { eventually, FleetScene, held } from './fixtures/fleet/scene.js';
import { pgScene } from './support/pg.js';

const up = await redisReachable();
if (!up) console.warn(`postgres-fleet tests skipped: no Redis at 127.0.0.1:${REDIS_PORT}`);
const pg = pgScene('fleet');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);

describe.skipIf(!up)('a fleet on PgLedger', () => {
  let scene: FleetScene;
  let raw: Client;
  let host: Host | undefined;
  const ledgers: PgLedger[] = [];

  beforeEach(async () => {
    raw = await client();
    scene = new FleetScene(uniquePrefix(), () => client());
  });

  afterEach(async () => {
    try {
      await host?.kill();
      await scene.cleanup();
      await Promise.all(ledgers.splice(0).map((l) => l.close()));
    } finally {
      host = undefined;
      await dropKeys(raw, scene.prefix);
      await raw.close();
    }
  });

  it('a SIGKILLed owner\'s turn is closed in the shared history by a sweep, and a live instance\'s turn is untouched', async () => {
    const schema = pg.schema();
    const open = async (instanceId: string) => {
      const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId });
      ledgers.push(ledger);
      return ledger;
    };
    const [ledgerB, ledgerC] = [await open(`B-${scene.prefix}`), await open(`C-${scene.prefix}`)];
    const b = await scene.instance('B', { leaseMs: 600, renewMs: 200, sweepMs: 50 }, { ledger: ledgerB });
    const c = await scene.instance('C', { leaseMs: 600, renewMs: 200, sweepMs: 50 }, { ledger: ledgerC });
    const h = held();
    const live = c.fleet.run('s-live', h.body, { turnId: 't-live' });
    const liveTurn = await h.started;

    host = new Host({ prefix: scene.prefix, nodeId: `A-${scene.prefix}`, pgSchema: schema, port: REDIS_PORT, leaseMs: 600, renewMs: 200, sweepMs: 60_000 });
    await host.next((e) => e.type === 'ready');
    host.send({ cmd: 'run', sessionId: 's-dead', turnId: 't-dead' });
    await host.next((e) => e.type === 'started');
    // A say and a tool call are committed a moment after their append resolved (queued: PgLedger.append).
    await eventually(async () => (await ledgerB.entries({ sessionId: 's-dead' })).length === 3, 5000, 'the say and the tool call to commit');
    expect((await ledgerB.entries({ sessionId: 's-dead' })).map(typeOf)).toEqual(['turn_started', 'say', 'tool_call']);
    await host.kill();

    await eventually(async () => (await b.fleet.turn('s-dead'))?.status === 'interrupted', 10_000, 'a sweep to mark the dead owner\'s turn');
    await eventually(async () => (await ledgerB.entries({ sessionId: 's-dead' })).length === 5, 5000, 'the history to be closed');
    const history = await ledgerC.entries({ sessionId: 's-dead' });
    expect(history.map(typeOf)).toEqual(['turn_started', 'say', 'tool_call', 'tool_aborted', 'status:interrupted']);
    expect(history[3]).toMatchObject({ output: INTERRUPTED_TOOL_TEXT });
    // The history says why, as the fleet's record does.
    expect(history[4]).toMatchObject({ reason: 'lease.expired' });
    expect(await b.fleet.turn('s-dead')).toMatchObject({ status: 'interrupted', reason: 'lease.expired' });
    await Promise.all([b.fleet.sweep(), c.fleet.sweep()]);
    expect(await ledgerB.entries({ sessionId: 's-dead' })).toHaveLength(5);

    expect(liveTurn.signal.aborted).toBe(false);
    expect((await ledgerB.entries({ sessionId: 's-live' })).map(typeOf)).toEqual(['turn_started']);
    h.release();
    expect(await live).toMatchObject({ status: 'completed' });
    expect((await ledgerB.entries({ sessionId: 's-live' })).map(typeOf)).toEqual(['turn_started', 'status:completed']);
  }, 30_000);
});
