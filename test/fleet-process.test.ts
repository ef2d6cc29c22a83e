/**
 * Fleet across processes: instance A runs in a child process (examples/fleet-host.ts),
 * instance B in this one, both on the shared Redis with a key prefix of their own.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { Fleet } from '../dist/src/fleet/index.js';
import { client, clientIdByName, dropKeys, Host, RedisProxy, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';

const up = await redisReachable();
if (!up) console.warn(`fleet-process tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

/** Poll `read` until `done` holds (liveness only: the bound is generous). */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms: number, what: string): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}; last ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function ledgerEntries(path: string): Array<Record<string, any>> {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

describe.skipIf(!up)('fleet across two processes', () => {
  let prefix: string;
  let dir: string;
  let raw: Client;
  let redisB: Client;
  let fleetB: Fleet;
  let runnerB: TurnRunner;
  let host: Host | undefined;
  let proxy: RedisProxy | undefined;

  beforeEach(async () => {
    prefix = uniquePrefix();
    dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    raw = await client();
    redisB = await client();
    runnerB = new TurnRunner({ registry: new TurnRegistry() });
    fleetB = await Fleet.start({ redis: redisB, runner: runnerB, nodeId: `B-${prefix}`, prefix, leaseMs: 1000, renewMs: 300, sweepMs: 100 });
  });

  afterEach(async () => {
    // The keys go whatever the checks find, so a failed check never leaves them on the shared server.
    try {
      await host?.kill();
      await fleetB.close();
      expect(fleetB.stats()).toEqual({ ownedTurns: 0, waitingStops: 0, retries: 0, openQuestions: 0, timers: 0 });
      await until(() => clientIdByName(raw, fleetB.subscriberName), (id) => id === undefined, 5000, 'the subscriber to go');
      expect(runnerB.registry.stats()).toMatchObject({ liveTokens: 0, liveSlots: 0, liveBridges: 0 });
    } finally {
      await host?.kill();
      host = undefined;
      await proxy?.close();
      proxy = undefined;
      await dropKeys(raw, prefix);
      await redisB.close();
      await raw.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  async function startHost(config: Record<string, unknown>): Promise<{ host: Host; ledger: string; ready: Record<string, any> }> {
    const ledger = join(dir, 'a.jsonl');
    host = new Host({ prefix, nodeId: `A-${prefix}`, ledger, port: REDIS_PORT, ...config });
    const ready = await host.next((e) => e.type === 'ready');
    return { host, ledger, ready };
  }

  it('a turn run by A is stopped by B: B gets `stopped` with A\'s real StopReport and A\'s ledger holds the whole stop in order', async () => {
    const { host, ledger } = await startHost({ leaseMs: 5000, renewMs: 1000, sweepMs: 1000 });
    host.send({ cmd: 'run', sessionId: 's1', turnId: 't1' });
    await host.next((e) => e.type === 'started');

    const answer = await fleetB.stop('s1', { timeoutMs: 5000 });
    const aborted = await host.next((e) => e.type === 'turn_aborted');
    expect(answer).toMatchObject({ outcome: 'stopped', sessionId: 's1', turnId: 't1', epoch: 1, node: `A-${prefix}` });
    expect(answer.outcome === 'stopped' && answer.report).toEqual(aborted.report);
    const outcome = await host.next((e) => e.type === 'outcome');
    expect(outcome).toMatchObject({ status: 'cancelled', turnId: 't1', epoch: 1 });
    expect(await fleetB.turn('s1')).toMatchObject({ status: 'cancelled', stopRequested: true, requester: `B-${prefix}` });

    host.send({ cmd: 'close' });
    await host.next((e) => e.type === 'closed');
    const entries = ledgerEntries(ledger).filter((e) => e.turnId === 't1');
    expect(entries.map((e) => (e.type === 'status' ? `status:${e.status}` : e.type))).toEqual(
      ['turn_started', 'say', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    expect(entries.find((e) => e.status === 'cancelling')).toMatchObject({ reason: 'cancel.user' });
  });

  it('a stop whose publish was lost (subscriber killed) still stops the turn at the next renewal; the caller that timed out got `cancelling`', async () => {
    const renewMs = 1000;
    // The host reaches Redis through a proxy that, once told, closes every connection of its
    // subscriber at the handshake (node-redis reconnects a dropped connection at once): the
    // subscriber stays down while the command connection works.
    proxy = await RedisProxy.start();
    const { host, ready } = await startHost({ leaseMs: 6000, renewMs, sweepMs: 1000, port: proxy.port, reconnectMs: 100 });
    proxy.blockName = ready.subscriberName;
    host.send({ cmd: 'run', sessionId: 's1', turnId: 't1' });
    await host.next((e) => e.type === 'started');

    const id = await clientIdByName(raw, ready.subscriberName);
    expect(id).toBeDefined();
    expect(await raw.sendCommand(['CLIENT', 'KILL', 'ID', id!])).toBe(1);
    expect(await clientIdByName(raw, ready.subscriberName)).toBeUndefined();

    // Stop just after a renewal, so the next one is a whole renewMs away: only it can deliver the stop.
    const first = (await fleetB.turn('s1'))!.leaseUntil;
    await until(() => fleetB.turn('s1'), (t) => t!.leaseUntil !== first, 3 * renewMs, 'a renewal');
    const stoppedAt = Date.now();
    const answer = await fleetB.stop('s1', { timeoutMs: 100 });
    expect(answer).toMatchObject({ outcome: 'cancelling', sessionId: 's1', turnId: 't1', epoch: 1 });
    expect(await clientIdByName(raw, ready.subscriberName)).toBeUndefined();

    const aborted = await host.next((e) => e.type === 'turn_aborted', 5000);
    expect(aborted.report.reason).toBe('cancel.user');
    expect(aborted.at - stoppedAt).toBeLessThan(renewMs + 1000);
    await host.next((e) => e.type === 'outcome');
    expect(await fleetB.turn('s1')).toMatchObject({ status: 'cancelled', stopRequested: true });
    // The subscriber never came back during all this: the renewal alone delivered the stop.
    expect(await clientIdByName(raw, ready.subscriberName)).toBeUndefined();
  });

  it('a SIGKILLed owner\'s turn is marked `interrupted` by another instance\'s sweep within leaseMs + sweepMs, and stays so', async () => {
    const leaseMs = 1000;
    const { host } = await startHost({ leaseMs, renewMs: 300, sweepMs: 300 });
    host.send({ cmd: 'run', sessionId: 's1', turnId: 't1' });
    await host.next((e) => e.type === 'started');
    expect(await fleetB.turn('s1')).toMatchObject({ status: 'running', node: `A-${prefix}` });

    const killedAt = performance.now();
    await host.kill();
    const swept = await until(() => fleetB.turn('s1'), (t) => t!.status === 'interrupted', 10_000, 'the sweep');
    const recoveredMs = performance.now() - killedAt;
    expect(swept).toMatchObject({ reason: 'lease.expired', epoch: 1 });
    expect(recoveredMs).toBeLessThan(leaseMs + 100 + 1000);

    expect(await fleetB.stop('s1')).toEqual({ outcome: 'interrupted', sessionId: 's1', turnId: 't1', epoch: 1, node: `A-${prefix}` });
    expect(await fleetB.stop('s1', { turnId: 't1' })).toMatchObject({ outcome: 'interrupted' });
    // Terminal for good: the id cannot be registered again, and the next turn is a new epoch.
    await expect(fleetB.run('s1', async () => 1, { turnId: 't1' })).rejects.toThrow(/already recorded/);
    expect(await fleetB.turn('s1')).toMatchObject({ turnId: 't1', status: 'interrupted' });
    const next = await fleetB.run('s1', async () => 2);
    expect(next).toMatchObject({ status: 'completed', value: 2, epoch: 2 });
    // The dead owner's claim on its turn id expired with its lease: another session may take the id.
    const reused = await until(() => fleetB.run('s2', async () => 3, { turnId: 't1' }).catch((e: unknown) => e), (v) => !(v instanceof Error), 5000, 'the claim to expire');
    expect(reused).toMatchObject({ status: 'completed', value: 3 });
  });

  it('an owner frozen (SIGSTOP) past its lease stops its own turn with `lease.lost` when it wakes; its late write is refused', async () => {
    const { host, ledger, ready } = await startHost({ leaseMs: 1000, renewMs: 250, sweepMs: 1000 });
    host.send({ cmd: 'run', sessionId: 's1', turnId: 't1' });
    await host.next((e) => e.type === 'started');

    process.kill(ready.pid, 'SIGSTOP');
    try {
      await until(() => fleetB.turn('s1'), (t) => t!.status === 'interrupted', 10_000, 'the sweep');
    } finally {
      process.kill(ready.pid, 'SIGCONT');
    }
    const outcome = await host.next((e) => e.type === 'outcome');
    expect(outcome).toMatchObject({ status: 'cancelled', turnId: 't1' });
    expect(outcome.report.reason).toBe('lease.lost');
    // The owner's terminal write came after the sweep's and was refused: the record keeps the sweep's.
    expect(await fleetB.turn('s1')).toMatchObject({ status: 'interrupted', reason: 'lease.expired' });
    host.send({ cmd: 'close' });
    await host.next((e) => e.type === 'closed');
    const statuses = ledgerEntries(ledger).filter((e) => e.type === 'status');
    expect(statuses.at(-1)).toMatchObject({ status: 'cancelled', reason: 'lease.lost' });
  });
});
