/**
 * The fleet on Redis Cluster 7 (scripts/redis-cluster.sh): turns on every shard stopped from
 * another instance, on the shared local cluster when it is up; then, on a cluster of the spec's
 * own (started on free ports, stopped after: a spec never kills a node it did not start), stops
 * through a slot migration and through a failover of the shard that holds a session (its master
 * SIGKILLed, its replica promoted, then restarted and given its role back).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { uniquePrefix } from './fixtures/fleet/support.js';
import { eventually, FleetScene, held } from './fixtures/fleet/scene.js';
import {
  CLUSTER_PORT, clusterLock, LocalCluster, noSubscriberOn, redisServerInstalled, sharedCluster, tryAgainCount,
} from './fixtures/fleet/cluster.js';

const up = await sharedCluster.reachable();
if (!up) console.warn(`fleet-cluster shared-cluster tests skipped: no Redis Cluster at 127.0.0.1:${CLUSTER_PORT}-${CLUSTER_PORT + 5} (start one with: bash scripts/redis-cluster.sh start; CI always has it)`);
const canStart = await redisServerInstalled();
if (!canStart) console.warn('fleet-cluster failover tests skipped: no redis-server on PATH to start a private cluster with (install Redis 7)');

/** One session id per master, found by asking the cluster where each one's keys live. */
async function sessionPerShard(cluster: LocalCluster, prefix: string): Promise<Map<number, string>> {
  const masters = (await cluster.topology()).filter((n) => n.master && !n.failed).map((n) => n.port);
  const picked = new Map<number, string>();
  for (let i = 0; picked.size < masters.length; i++) {
    const id = `s${i}`;
    const port = await cluster.masterOf(`${prefix}:{${id}}:turns`);
    if (!picked.has(port)) picked.set(port, id);
  }
  return picked;
}

describe.skipIf(!up)('fleet on the shared Redis Cluster', () => {
  let scene: FleetScene;
  let release: () => Promise<void>;

  beforeEach(async () => {
    release = await clusterLock('shared');
    scene = new FleetScene(uniquePrefix(), () => sharedCluster.client());
  });

  afterEach(async () => {
    try {
      await scene.cleanup();
      expect((await sharedCluster.keysUnder(scene.prefix)).filter((k) => k.endsWith(':leases'))).toEqual([]);
    } finally {
      await sharedCluster.dropKeys(scene.prefix);
      await release();
    }
  });

  it('a turn on each of the three shards is stopped from another instance, with the owner\'s StopReport', async () => {
    const a = await scene.instance('A');
    const b = await scene.instance('B');
    const sessions = [...(await sessionPerShard(sharedCluster, scene.prefix)).values()];
    expect(sessions).toHaveLength(3);
    const bodies = sessions.map(() => held());
    const runs = sessions.map((s, i) => a.fleet.run(s, bodies[i]!.body, { turnId: `t-${s}` }));
    await Promise.all(bodies.map((h) => h.started));
    const answers = await Promise.all(sessions.map((s) => b.fleet.stop(s, { reason: 'cancel.user', timeoutMs: 5000 })));
    const outcomes = await Promise.all(runs);
    sessions.forEach((s, i) => {
      expect(answers[i]).toMatchObject({ outcome: 'stopped', sessionId: s, turnId: `t-${s}`, node: a.fleet.nodeId });
      expect(outcomes[i]).toMatchObject({ status: 'cancelled', turnId: `t-${s}` });
      expect(answers[i]!.outcome === 'stopped' && answers[i]!.report).toEqual(outcomes[i]!.report);
    });
    for (const s of sessions) expect(await b.fleet.turn(s)).toMatchObject({ status: 'cancelled', reason: 'cancel.user', requester: b.fleet.nodeId });
  });
});

describe.skipIf(!canStart)('fleet on a Redis Cluster of its own, through slot migrations and failovers', () => {
  let cluster: LocalCluster;
  let scene: FleetScene;

  beforeAll(async () => {
    cluster = await LocalCluster.startPrivate();
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  beforeEach(() => {
    scene = new FleetScene(uniquePrefix(), () => cluster.client());
  });

  afterEach(async () => {
    try {
      await scene.cleanup();
      expect((await cluster.keysUnder(scene.prefix)).filter((k) => k.endsWith(':leases'))).toEqual([]);
    } finally {
      await cluster.dropKeys(scene.prefix);
    }
  });

  it('through a slot migration of a session\'s slot under a running turn: a stop retries through TRYAGAIN and answers stopped; the owner keeps its lease', async () => {
    const opts = { leaseMs: 1500, renewMs: 300, sweepMs: 300 };
    const a = await scene.instance('A', opts);
    const b = await scene.instance('B', opts);
    const session = `mig-${scene.prefix.split(':').pop()}`;
    const key = `${scene.prefix}:{${session}}:turns`;
    const h = held();
    const run = a.fleet.run(session, h.body, { turnId: 't1' });
    const turn = await h.started;
    const slot = await cluster.slotOf(key);
    const from = await cluster.masterOf(key);
    const to = (await cluster.topology()).find((n) => n.master && !n.failed && n.port !== from)!.port;
    const before = await tryAgainCount(to);
    const migration = await cluster.beginSlotMigration(slot, from, to);
    try {
      const stop = b.fleet.stop(session, { reason: 'cancel.user', timeoutMs: 10_000 });
      // The stop has been refused at least once; the migration then lasts two renewal periods more
      // (the owner's renewals meet it too) before the operator finishes it.
      await eventually(async () => (await tryAgainCount(to)) > before, 5000, 'a script to be refused with TRYAGAIN');
      const heldFrom = performance.now();
      await eventually(() => performance.now() - heldFrom > 2 * opts.renewMs, 5000, 'two renewal periods');
      expect(turn.signal.aborted).toBe(false);
      await migration.finish();
      const answer = await stop;
      expect(answer).toMatchObject({ outcome: 'stopped', sessionId: session, turnId: 't1', node: a.fleet.nodeId });
      const outcome = await run;
      // Stopped by the user's stop, never by a lost lease.
      expect(outcome).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.user' } });
      expect(await b.fleet.turn(session)).toMatchObject({ status: 'cancelled', reason: 'cancel.user', requester: b.fleet.nodeId });
      expect(await cluster.masterOf(key)).toBe(to);
    } finally {
      // Put the slot back where it was (also from a migration left half done), for the specs after this one.
      await (await cluster.beginSlotMigration(slot, to, from)).finish();
    }
    expect(await cluster.masterOf(key)).toBe(from);
  }, 60_000);

  it('through a failover of a session\'s shard: stops answer definitively, the owner self-fences within its lease, other shards are untouched, and both instances follow the new topology', async () => {
    const leaseMs = 1200;
    const opts = { leaseMs, renewMs: 200, sweepMs: 200, commandTimeoutMs: 500 };
    const a = await scene.instance('A', opts);
    const b = await scene.instance('B', opts);
    // The victim: a shard whose master holds neither instance's subscriber, so killing it cuts
    // stops to that shard only, never the delivery of the others' messages.
    const shards = [...(await sessionPerShard(cluster, scene.prefix)).entries()] as Array<[number, string]>;
    const free: boolean[] = [];
    for (const [port] of shards) free.push(await noSubscriberOn(port, scene.prefix));
    const v = free.indexOf(true);
    expect(v).toBeGreaterThanOrEqual(0);
    const [[victimPort, victim], [, other], [, third]] = [shards[v]!, ...shards.filter((_, i) => i !== v)];
    const bodies = new Map([victim, other, third].map((s) => [s, held()]));
    const runs = new Map([victim, other, third].map((s) => [s, a.fleet.run(s, bodies.get(s)!.body, { turnId: `t-${s}` })]));
    let victimEndedAt = Infinity;
    void runs.get(victim)!.finally(() => { victimEndedAt = performance.now(); });
    const turns = new Map(await Promise.all([...bodies].map(async ([s, h]) => [s, await h.started] as const)));
    const livePort = cluster.ports.find((p) => p !== victimPort)!;

    const pid = await cluster.pidOf(victimPort);
    const killedAt = performance.now();
    process.kill(pid, 'SIGKILL');
    try {
      // A stop sent to the shard with no master (well within the election's first second) answers
      // relay_unavailable within its timeout.
      const t0 = performance.now();
      const during = await b.fleet.stop(victim, { timeoutMs: 300 });
      expect(during).toMatchObject({ outcome: 'relay_unavailable', sessionId: victim });
      expect(performance.now() - t0).toBeLessThan(300 + 500);
      // Another shard meanwhile: a stop reaches its turn and is acknowledged.
      const otherAnswer = await b.fleet.stop(other, { timeoutMs: 5000 });
      expect(otherAnswer).toMatchObject({ outcome: 'stopped', turnId: `t-${other}` });
      expect(await runs.get(other)).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.user' } });

      // The owner cannot renew the victim's lease while its shard has no master: it stops the turn itself.
      const victimOutcome = await runs.get(victim)!;
      const endedAfter = victimEndedAt - killedAt;
      expect(victimOutcome).toMatchObject({ status: 'cancelled', report: { reason: 'lease.lost' } });
      expect(endedAfter).toBeLessThan(leaseMs + 2000);

      // The replica is promoted; the record answers definitively (the lease had run out: interrupted).
      await eventually(async () => (await cluster.masterOf(`${scene.prefix}:{${victim}}:turns`, livePort).catch(() => victimPort)) !== victimPort, 15_000, 'the replica to be promoted');
      const failoverMs = performance.now() - killedAt;
      let after: Awaited<ReturnType<typeof b.fleet.stop>> | undefined;
      await eventually(async () => (after = await b.fleet.stop(victim, { timeoutMs: 1000 })).outcome !== 'relay_unavailable', 10_000, 'the shard to answer');
      // The election takes longer than the lease: the record's lease has run out, the owner's late
      // write was refused, so the record says interrupted.
      expect(after).toMatchObject({ outcome: 'interrupted', turnId: `t-${victim}`, node: a.fleet.nodeId });

      // The third shard's turn ran through it all, still owned: a stop after the failover is acknowledged.
      expect(turns.get(third)!.signal.aborted).toBe(false);
      expect(await b.fleet.turn(third)).toMatchObject({ status: 'running', node: a.fleet.nodeId, stopRequested: false });
      expect(await b.fleet.stop(third, { timeoutMs: 5000 })).toMatchObject({ outcome: 'stopped', turnId: `t-${third}` });
      expect(await runs.get(third)).toMatchObject({ status: 'cancelled' });
      console.info(`failover: victim turn ended ${Math.round(endedAfter)} ms after the SIGKILL (${victimOutcome.report!.reason}); replica promoted after ${Math.round(failoverMs)} ms`);
    } finally {
      await cluster.restartNode(victimPort);
      // Its old replica was promoted: hand the master role back, so the roles are as before.
      await cluster.promoteBack(victimPort);
    }
  }, 60_000);
});

describe('a cluster client with no node reachable', () => {
  it('Fleet.start resolves, stop answers relay_unavailable, run refuses, and close leaves no timer', async () => {
    const { createCluster } = await import('redis');
    const { TurnRegistry, TurnRunner } = await import('../dist/src/index.js');
    const { Fleet, FleetUnavailableError } = await import('../dist/src/fleet/index.js');
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    // Port 1 on loopback: nothing listens there, so every connect is refused at once.
    const redis = createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port: 1 } }], defaults: { socket: { reconnectStrategy: false } } });
    redis.on('error', () => {});
    const registry = new TurnRegistry();
    const t0 = performance.now();
    const fleet = await Fleet.start({ redis, runner: new TurnRunner({ registry }), prefix: uniquePrefix(), commandTimeoutMs: 500 });
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(await fleet.stop('s1', { timeoutMs: 200 })).toMatchObject({ outcome: 'relay_unavailable', sessionId: 's1' });
    await expect(fleet.run('s1', async () => 1)).rejects.toThrow(FleetUnavailableError);
    expect(registry.currentToken('s1')).toBeUndefined();
    await fleet.close();
    expect(fleet.stats()).toEqual({ ownedTurns: 0, waitingStops: 0, retries: 0, openQuestions: 0, timers: 0 });
    redis.destroy();
    // The connect retry (one a second) ends with the fleet.
    await eventually(() => timers() <= before, 3000, 'the connect retry to end');
  });
});
