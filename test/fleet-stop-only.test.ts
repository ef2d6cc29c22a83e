/**
 * A stop-only client (`Fleet.connect`, DESIGN §11.2), on one Redis and on Redis Cluster: a process
 * that runs no turns — no `TurnRunner` — stops a turn instance A runs (`stopped`, with A's
 * report), answers a question asked in A's turn (`accepted`), reads turns, keeps a stop for a turn
 * not started (`pending`); its `close()` leaves no connection and it writes no key of its own.
 */
import { describe, expect, it } from 'vitest';
import { Fleet, type FleetClient, type FleetRedisClient } from '../dist/src/fleet/index.js';
import { backendScene, backends } from './fixtures/fleet/backends.js';
import { asking, eventually, held } from './fixtures/fleet/scene.js';
import { client as singleClient, clientIdByName } from './fixtures/fleet/support.js';

for (const backend of await backends('fleet-stop-only')) {
  describe.skipIf(!backend.up)(`a stop-only client, on ${backend.name}`, () => {
    const current = backendScene(backend);

    /** A client of its own (not any instance's) and a stop-only client on it; both closed by the test. */
    async function gateway(): Promise<{ redis: FleetRedisClient; fleet: FleetClient }> {
      const redis = await backend.client();
      return { redis, fleet: await Fleet.connect({ redis, prefix: current.scene.prefix, nodeId: `gw-${current.scene.prefix}` }) };
    }

    it('stops a turn A runs (stopped, with A\'s report), answers a question of A\'s turn (accepted), reads turns; close() leaves its caller\'s client open and nothing of its own', async () => {
      const a = await current.scene.instance('A');
      const gw = await gateway();
      try {
        expect('run' in gw.fleet).toBe(false);
        expect(await gw.fleet.turn('s1')).toBeNull();
        expect(await gw.fleet.stop('s1')).toEqual({ outcome: 'not_found', sessionId: 's1' });

        // Stop: the owner's acknowledgement reaches the client's own channel.
        const h = held();
        const run = a.fleet.run('s1', h.body, { turnId: 't1' });
        await h.started;
        expect(await gw.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'running', node: a.fleet.nodeId });
        const stopped = await gw.fleet.stop('s1', { reason: 'cancel.user', timeoutMs: 5000 });
        expect(stopped).toMatchObject({ outcome: 'stopped', sessionId: 's1', turnId: 't1', node: a.fleet.nodeId, report: { reason: 'cancel.user', turnId: 't1' } });
        expect(await run).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.user' } });
        expect(await gw.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'cancelled', requester: gw.fleet.nodeId });
        expect(await gw.fleet.stop('s1', { turnId: 't1' })).toEqual({ outcome: 'already_finished', sessionId: 's1', turnId: 't1', status: 'cancelled' });

        // Answer: the owner's confirmation reaches the client's own channel.
        const q = asking(a);
        const asked = a.fleet.run('s1', q.body, { turnId: 't2' });
        const questionId = await q.asked;
        await eventually(async () => (await backend.keys(current.scene.prefix)).some((k) => k.endsWith(':question')), 5000, 'the question to be registered');
        expect(await gw.fleet.answer(questionId, { colour: 'blue' }, { timeoutMs: 5000 })).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
        expect(await asked).toMatchObject({ status: 'completed', value: { colour: 'blue' } });
        expect(await gw.fleet.answer(questionId, 'late')).toEqual({ outcome: 'not_found', questionId });

        // Stop before start: kept for the turn id, which then runs nothing of its body on A.
        expect(await gw.fleet.stop('s1', { turnId: 't3', reason: 'cancel.client' })).toEqual({ outcome: 'pending', sessionId: 's1', turnId: 't3' });
        let ran = false;
        expect(await a.fleet.run('s1', async () => { ran = true; }, { turnId: 't3' })).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.client' } });
        expect(ran).toBe(false);

        expect(gw.fleet.stats()).toEqual({ waitingStops: 0, answering: 0, connected: true });
        // No key of its own: nothing under the prefix names it (its stops are on the session's keys).
        expect((await backend.keys(current.scene.prefix)).filter((k) => k.includes(gw.fleet.nodeId))).toEqual([]);
      } finally {
        await gw.fleet.close();
      }
      expect(gw.fleet.stats()).toEqual({ waitingStops: 0, answering: 0, connected: false });
      expect(gw.redis.isOpen).toBe(true); // the caller's, left open
      expect(await gw.fleet.stop('s1')).toMatchObject({ outcome: 'relay_unavailable', sessionId: 's1' });
      expect(await gw.fleet.answer('q', 'x')).toMatchObject({ outcome: 'relay_unavailable', questionId: 'q' });
      gw.redis.destroy();
    });

    it('refuses bad options naming them, before anything reaches Redis', async () => {
      const redis = await backend.client();
      try {
        await expect(Fleet.connect({} as never)).rejects.toThrow(/^options\.redis/);
        await expect(Fleet.connect({ redis, nodeId: 'has space' })).rejects.toThrow(/^options\.nodeId/);
        await expect(Fleet.connect({ redis, prefix: 'p'.repeat(2000) })).rejects.toBeInstanceOf(RangeError);
        await expect(Fleet.connect({ redis, runner: {} } as never)).rejects.toThrow(/^options\.runner/);
        await expect(Fleet.connect({ redis, commandTimeoutMs: 0 })).rejects.toThrow(/^options\.commandTimeoutMs/);
      } finally {
        redis.destroy();
      }
    });
  });
}

describe('a stop-only client\'s connection, by name in CLIENT LIST (one Redis)', () => {
  it('is one named connection while connected, and none after close()', async () => {
    const [single] = await backends('fleet-stop-only');
    if (!single.up) return;
    const redis = await singleClient();
    const look = await singleClient();
    try {
      const fleet = await Fleet.connect({ redis, prefix: `fullstop-test:${process.pid}:stop-only-conn` });
      expect(await clientIdByName(look, fleet.subscriberName)).toBeDefined();
      await fleet.close();
      await eventually(async () => (await clientIdByName(look, fleet.subscriberName)) === undefined, 5000, 'the subscriber to be gone');
      expect(redis.isOpen).toBe(true);
    } finally {
      redis.destroy();
      look.destroy();
    }
  });
});
