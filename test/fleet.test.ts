/**
 * Fleet in one process: several instances (a Fleet, a TurnRunner and a Redis client each) on the
 * shared Redis, each test under a key prefix of its own. Redis outages go through a local proxy.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SessionBusyError, TurnIdUsedError, TurnRegistry, TurnRunner, type Turn } from '../dist/src/index.js';
import { Fleet, FleetTurnRefusedError, FleetUnavailableError, type StopAnswer } from '../dist/src/fleet/index.js';
import { client, clientIdByName, dropKeys, keysUnder, RedisProxy, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';

const up = await redisReachable();
if (!up) console.warn(`fleet tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

/** Resolves once `check` holds (liveness only: polled, bounded generously). */
async function eventually(check: () => Promise<boolean> | boolean, ms = 5000, what = 'condition'): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A body that waits until its turn is stopped (or `release` is called), then returns. */
function held(): { body: (turn: Turn) => Promise<string>; started: Promise<Turn>; release: () => void } {
  let started!: (turn: Turn) => void;
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  return {
    started: new Promise((r) => { started = r; }),
    release: () => release(),
    body: async (turn) => {
      started(turn);
      await Promise.race([released, new Promise((r) => turn.signal.addEventListener('abort', r, { once: true }))]);
      return 'done';
    },
  };
}

/**
 * `redis` with no reply ever given to a command on a key of a session in `cut` (`P:{sessionId}:…`):
 * a partition of that session's keys alone, as a cluster shard with no master is to its client.
 */
function withheld(redis: Client, cut: ReadonlySet<string>): Client {
  const isCut = (args: readonly string[]) => args.some((arg) => [...cut].some((s) => arg.includes(`:{${s}}:`)));
  return new Proxy(redis, {
    get(target, name) {
      if (name === 'sendCommand') {
        return (args: string[], options?: unknown) => (isCut(args) ? new Promise(() => {}) : (target.sendCommand as (...a: unknown[]) => Promise<unknown>)(args, options));
      }
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe.skipIf(!up)('fleet on one Redis', () => {
  let prefix: string;
  let raw: Client;
  const fleets: Fleet[] = [];
  const clients: Client[] = [];
  const registries: TurnRegistry[] = [];
  let proxy: RedisProxy | undefined;

  async function instance(name: string, options: Record<string, unknown> = {}, port?: number) {
    const redis = await client(port ?? REDIS_PORT, { connect: port === undefined });
    clients.push(redis);
    const registry = new TurnRegistry();
    registries.push(registry);
    const runner = new TurnRunner({ registry });
    const fleet = await Fleet.start({ redis, runner, nodeId: `${name}-${prefix}`, prefix, leaseMs: 3000, ...options });
    fleets.push(fleet);
    return { redis, runner, registry, fleet };
  }

  beforeEach(async () => {
    prefix = uniquePrefix();
    raw = await client();
  });

  afterEach(async () => {
    // The keys go whatever the checks find, so a failed check never leaves them on the shared server.
    try {
      for (const fleet of fleets.splice(0)) {
        await fleet.close();
        expect(fleet.stats()).toEqual({ ownedTurns: 0, waitingStops: 0, retries: 0, openQuestions: 0, timers: 0 });
        await eventually(async () => (await clientIdByName(raw, fleet.subscriberName)) === undefined, 5000, 'the subscriber to go');
      }
      for (const r of registries.splice(0)) expect(r.stats()).toMatchObject({ liveTokens: 0, liveSlots: 0, liveBridges: 0 });
      expect(await raw.exists(`${prefix}:leases`)).toBe(0);
    } finally {
      for (const fleet of fleets.splice(0)) await fleet.close();
      for (const c of clients.splice(0)) c.destroy();
      registries.length = 0;
      await proxy?.close();
      proxy = undefined;
      await dropKeys(raw, prefix);
      await raw.close();
    }
  });

  it('passes run\'s input to the runner (recorded on turn_started); one JSON cannot encode is refused naming it before anything is registered', async () => {
    const a = await instance('A');
    const started: unknown[] = [];
    a.runner.on('turn_started', (p) => started.push(p.input));
    await expect(a.fleet.run('s1', async () => 1, { turnId: 'bad', input: 1n })).rejects.toThrow(/options\.input/);
    expect(await a.fleet.turn('s1')).toBeNull();
    expect(await a.fleet.run('s1', async () => 1, { turnId: 't1', input: { text: 'hi' } })).toMatchObject({ status: 'completed' });
    expect(started).toEqual([{ text: 'hi' }]);
  });

  it('records the stop (cancelling, reason, requester) before publishing it, and answers not_found / already_finished without publishing', async () => {
    const a = await instance('A');
    const b = await instance('B');
    // A listener on every node channel of this prefix: it reads the record the moment a stop arrives.
    const listener = await client();
    clients.push(listener);
    const seen: Array<{ channel: string; message: string; record: unknown }> = [];
    const reads: Promise<unknown>[] = [];
    await listener.pSubscribe(`${prefix}:node:*`, (message, channel) => {
      reads.push(b.fleet.turn('s1').then((record) => seen.push({ channel, message, record })));
    });

    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't1' });
    await h.started;
    const answer = await b.fleet.stop('s1', { reason: 'cancel.user', timeoutMs: 5000 });
    expect(answer.outcome).toBe('stopped');
    await run;
    await Promise.all(reads);
    const stopMessage = seen.find((s) => JSON.parse(s.message).kind === 'stop')!;
    expect(stopMessage.channel).toBe(`${prefix}:node:${a.fleet.nodeId}`);
    expect(stopMessage.record).toMatchObject({ turnId: 't1', status: expect.stringMatching(/^(cancelling|cancelled)$/), stopRequested: true, reason: 'cancel.user', requester: b.fleet.nodeId });

    seen.length = 0;
    expect(await b.fleet.stop('nobody')).toEqual({ outcome: 'not_found', sessionId: 'nobody' });
    expect(await b.fleet.stop('s1', { turnId: 'never' })).toEqual({ outcome: 'pending', sessionId: 's1', turnId: 'never' });
    expect(await b.fleet.stop('s1')).toEqual({ outcome: 'already_finished', sessionId: 's1', turnId: 't1', status: 'cancelled' });
    // A sentinel published after them arrives after anything they published: nothing but it arrives.
    await raw.publish(`${prefix}:node:sentinel`, 'sentinel');
    await new Promise<void>((resolve) => { const t = setInterval(() => { if (reads.length > 0) { clearInterval(t); resolve(); } }, 5); });
    await Promise.all(reads);
    expect(seen.map((s) => s.message)).toEqual(['sentinel']);
  });

  it('fences by turn id and epoch: a stop of an ended turn never touches the session\'s next turn', async () => {
    const a = await instance('A');
    const b = await instance('B');
    const first = await a.fleet.run('s1', async () => 1, { turnId: 't1' });
    expect(first).toMatchObject({ status: 'completed', epoch: 1 });

    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't2' });
    const turn = await h.started;
    expect(await b.fleet.stop('s1', { turnId: 't1' })).toEqual({ outcome: 'already_finished', sessionId: 's1', turnId: 't1', status: 'completed' });
    expect(turn.signal.aborted).toBe(false);
    expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't2', epoch: 2, status: 'running', stopRequested: false });

    // Forged stops for t2 with a wrong epoch, and for t1, reach A's channel first; then a real stop.
    const channel = `${prefix}:node:${a.fleet.nodeId}`;
    expect(await raw.publish(channel, JSON.stringify({ kind: 'stop', sessionId: 's1', turnId: 't2', epoch: 1, reason: 'forged.epoch' }))).toBe(1);
    expect(await raw.publish(channel, JSON.stringify({ kind: 'stop', sessionId: 's1', turnId: 't1', epoch: 1, reason: 'forged.turn' }))).toBe(1);
    const answer = await b.fleet.stop('s1', { turnId: 't2', timeoutMs: 5000 });
    // Had a forged stop been obeyed, the real one would have joined it and carry its reason.
    expect(answer).toMatchObject({ outcome: 'stopped', turnId: 't2', epoch: 2 });
    expect(answer.outcome === 'stopped' && answer.report.reason).toBe('cancel.user');
    expect((await run).status).toBe('cancelled');
  });

  it('keeps exactly one terminal status when two instances stop a turn while it completes', async () => {
    const a = await instance('A');
    const b = await instance('B');
    const c = await instance('C');
    const tally = { stopped: 0, completed: 0 };
    for (let i = 0; i < 12; i++) {
      const h = held();
      const run = a.fleet.run('race', h.body, { turnId: `r${i}` });
      await h.started;
      // Completion and both stops leave together; the completion is let go at a different moment
      // each round (at once, after about one or a few Redis round trips, never), so who wins varies.
      const stops = [b.fleet.stop('race', { turnId: `r${i}`, timeoutMs: 5000 }), c.fleet.stop('race', { turnId: `r${i}`, timeoutMs: 5000 })];
      const delay = [0, 0.2, 0.5, 1, 2, -1][i % 6]!;
      if (delay === 0) h.release(); else if (delay > 0) setTimeout(h.release, delay);
      const outcome = await run;
      const answers: StopAnswer[] = await Promise.all(stops);
      const record = await b.fleet.turn('race');
      expect(record).toMatchObject({ turnId: `r${i}`, status: outcome.status });
      if (outcome.status === 'cancelled') {
        tally.stopped++;
        expect(answers.some((x) => x.outcome === 'stopped')).toBe(true);
        for (const x of answers) {
          if (x.outcome === 'stopped') expect(x.report).toEqual(outcome.report);
          else expect(x).toMatchObject({ outcome: 'already_finished', status: 'cancelled' });
        }
      } else {
        tally.completed++;
        expect(outcome.status).toBe('completed');
        for (const x of answers) expect(x).toMatchObject({ outcome: 'already_finished', status: 'completed' });
      }
      // Terminal is terminal: a late stop changes nothing.
      expect(await b.fleet.stop('race', { turnId: `r${i}` })).toMatchObject({ outcome: 'already_finished', status: outcome.status });
    }
    expect(tally.stopped).toBeGreaterThan(0);
    expect(tally.completed).toBeGreaterThan(0);
  });

  it('while Redis is down: start resolves, stop answers relay_unavailable within timeoutMs, run refuses (or runs unregistered with `local`), runner.stop still works; then it reconnects', async () => {
    proxy = await RedisProxy.start();
    proxy.refuse();
    const started = performance.now();
    const a = await instance('A', {}, proxy.port);
    const local = await instance('L', { onUnavailable: 'local' }, proxy.port);
    expect(performance.now() - started).toBeLessThan(5000);

    const t0 = performance.now();
    const answer = await a.fleet.stop('s1', { timeoutMs: 300 });
    expect(answer).toMatchObject({ outcome: 'relay_unavailable', sessionId: 's1' });
    expect(answer.outcome === 'relay_unavailable' && answer.error).toBeInstanceOf(FleetUnavailableError);
    expect(performance.now() - t0).toBeLessThan(300 + 200);

    await expect(a.fleet.run('s1', async () => 1)).rejects.toThrow(FleetUnavailableError);
    expect(a.registry.currentToken('s1')).toBeUndefined();

    const h = held();
    const run = local.fleet.run('s2', h.body);
    await h.started;
    const report = await local.runner.stop('s2');
    expect(report).toMatchObject({ sessionId: 's2', reason: 'cancel.user' });
    expect(await run).toMatchObject({ status: 'cancelled', unregistered: true });

    proxy.pass();
    await new Promise<void>((resolve) => { const t = setInterval(() => { if (a.redis.isReady && local.redis.isReady) { clearInterval(t); resolve(); } }, 10); });
    expect(await a.fleet.run('s1', async () => 7)).toMatchObject({ status: 'completed', value: 7, epoch: 1 });
    expect(await local.fleet.run('s3', async () => 8)).not.toHaveProperty('unregistered');
  });

  it('answers relay_unavailable within timeoutMs when Redis stops answering on an open connection', async () => {
    proxy = await RedisProxy.start();
    const a = await instance('A', {}, proxy.port);
    await new Promise<void>((resolve) => { const t = setInterval(() => { if (a.redis.isReady) { clearInterval(t); resolve(); } }, 10); });
    proxy.hang();
    const t0 = performance.now();
    expect(await a.fleet.stop('s1', { timeoutMs: 300 })).toMatchObject({ outcome: 'relay_unavailable' });
    expect(performance.now() - t0).toBeLessThan(300 + 200);
    proxy.refuse();
  });

  it('an owner cut off from Redis stops its own turn with lease.lost once its lease runs out; the record says interrupted', async () => {
    proxy = await RedisProxy.start();
    const leaseMs = 600;
    const a = await instance('A', { leaseMs, renewMs: 150, commandTimeoutMs: 200 }, proxy.port);
    const b = await instance('B', { sweepMs: 100 });
    await new Promise<void>((resolve) => { const t = setInterval(() => { if (a.redis.isReady) { clearInterval(t); resolve(); } }, 10); });
    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't1' });
    await h.started;
    proxy.refuse();
    const cut = performance.now();
    const outcome = await run;
    expect(outcome).toMatchObject({ status: 'cancelled' });
    expect(outcome.report!.reason).toBe('lease.lost');
    expect(performance.now() - cut).toBeLessThan(leaseMs + 1000);
    // A stopped before Redis's deadline (its clock counts from when it sent the renewal); once that
    // deadline passes, B's sweep marks the turn interrupted; A never wrote anything after its lease.
    await eventually(async () => { await b.fleet.sweep(); return (await b.fleet.turn('s1'))?.status === 'interrupted'; }, 5000, 'the sweep');
    proxy.pass();
    await new Promise<void>((resolve) => { const t = setInterval(() => { if (a.redis.isReady) { clearInterval(t); resolve(); } }, 10); });
    expect(await b.fleet.turn('s1')).toMatchObject({ status: 'interrupted', reason: 'lease.expired' });
  });

  it('a turn whose renewals go unanswered loses its lease alone: the owner\'s other turn keeps renewing through it and stays stoppable', async () => {
    const leaseMs = 1200;
    // The replies for one session's keys withheld (as from a shard whose master died): its
    // renewals hang until their lease would end, while the other session's are answered.
    const cut = new Set<string>();
    const redis = withheld(await client(), cut);
    clients.push(redis);
    const registry = new TurnRegistry();
    registries.push(registry);
    const a = await Fleet.start({ redis, runner: new TurnRunner({ registry }), nodeId: `A-${prefix}`, prefix, leaseMs, renewMs: 200, commandTimeoutMs: 500 });
    fleets.push(a);
    const b = await instance('B', { leaseMs, sweepMs: 100 });
    const [lost, kept] = [held(), held()];
    const lostRun = a.run('lost', lost.body, { turnId: 't-lost' });
    const keptRun = a.run('kept', kept.body, { turnId: 't-kept' });
    const keptTurn = (await Promise.all([lost.started, kept.started]))[1];
    cut.add('lost');
    const cutAt = performance.now();
    expect(await lostRun).toMatchObject({ status: 'cancelled', report: { reason: 'lease.lost' } });
    expect(performance.now() - cutAt).toBeLessThan(leaseMs + 1000);
    // Renewed past the lease it had when the other turn was fenced: it never lost its own.
    const leaseThen = (await b.fleet.turn('kept'))!.leaseUntil;
    await eventually(async () => (await b.fleet.turn('kept'))!.leaseUntil > leaseThen + leaseMs, 5000, 'the kept turn to renew through a whole lease');
    expect(keptTurn.signal.aborted).toBe(false);
    expect(await b.fleet.turn('kept')).toMatchObject({ status: 'running', node: a.nodeId, stopRequested: false });
    expect(await b.fleet.stop('kept', { timeoutMs: 5000 })).toMatchObject({ outcome: 'stopped', turnId: 't-kept' });
    expect(await keptRun).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.user' } });
    // The cut-off turn's record is left to the sweep, which marks it interrupted (and drops its lease).
    await eventually(async () => { await b.fleet.sweep(); return (await b.fleet.turn('lost'))?.status === 'interrupted'; }, 5000, 'the sweep');
  });

  it('leaves nothing after close(): no subscriber, no timer, no lease, only finished records that expire', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const a = await instance('A', { finishedTtlMs: 1500 });
    const b = await instance('B', { finishedTtlMs: 1500 });
    const h = held();
    const run = a.fleet.run('s1', h.body);
    await h.started;
    await b.fleet.stop('s1');
    await run;
    await a.fleet.run('s2', async () => 1);
    // A turn still running at close is released (interrupted), not left owned.
    const h3 = held();
    const run3 = a.fleet.run('s3', h3.body, { turnId: 't3' });
    await h3.started;
    for (const f of fleets.splice(0)) {
      await f.close();
      expect(f.stats()).toEqual({ ownedTurns: 0, waitingStops: 0, retries: 0, openQuestions: 0, timers: 0 });
      await eventually(async () => (await clientIdByName(raw, f.subscriberName)) === undefined, 5000, 'the subscriber to go');
    }
    expect(await b.fleet.stop('s1')).toMatchObject({ outcome: 'relay_unavailable' });
    expect(timers()).toBeLessThanOrEqual(before);
    const keys = await keysUnder(raw, prefix);
    const claims = keys.filter((k) => k.endsWith(':claim')); // each turn id's claim, kept as long as its record (finishedTtlMs)
    expect(claims).toHaveLength(3);
    expect(claims).toContain(`${prefix}:{t:t3}:claim`);
    expect(keys.filter((k) => !claims.includes(k)).sort()).toEqual([`${prefix}:{s1}:finished`, `${prefix}:{s1}:turns`, `${prefix}:{s2}:finished`, `${prefix}:{s2}:turns`, `${prefix}:{s3}:finished`, `${prefix}:{s3}:turns`]);
    for (const key of keys) {
      const ttl = Number(await raw.sendCommand(['PTTL', key]));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1500);
    }
    const record = await raw.hGet(`${prefix}:{s3}:turns`, 't:t3');
    expect(JSON.parse(record!)).toMatchObject({ status: 'interrupted', reason: 'fleet.closed' });
    h3.release();
    expect((await run3).status).toBe('completed');
    await new Promise<void>((resolve) => { const t = setInterval(async () => { if ((await keysUnder(raw, prefix)).length === 0) { clearInterval(t); resolve(); } }, 100); });
  });

  it('refuses a second live turn of a session across instances, and a turn id already recorded', async () => {
    const a = await instance('A');
    const b = await instance('B');
    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't1' });
    await h.started;
    await expect(b.fleet.run('s1', async () => 1)).rejects.toThrow(FleetTurnRefusedError);
    await expect(b.fleet.run('s1', async () => 1)).rejects.toMatchObject({ code: 'ERR_FULLSTOP_SESSION_BUSY', sessionId: 's1' });
    await expect(b.fleet.run('s1', async () => 1)).rejects.toThrow(SessionBusyError);
    expect(b.registry.currentToken('s1')).toBeUndefined();
    await expect(a.fleet.run('s1', async () => 1)).rejects.toThrow(/already has a running turn/);
    h.release();
    await run;
    await expect(b.fleet.run('s1', async () => 1, { turnId: 't1' })).rejects.toThrow(/already recorded/);
    await expect(b.fleet.run('s1', async () => 1, { turnId: 't1' })).rejects.toThrow(TurnIdUsedError);
  });

  it('two runs of one session at once on one node: exactly one runs, the other is refused starting nothing, and the running one stays stoppable from another instance', async () => {
    const a = await instance('A');
    const b = await instance('B');
    const first = held();
    const second = held();
    let secondCalled = false;
    const runs = [
      a.fleet.run('s1', first.body, { turnId: 't1' }),
      a.fleet.run('s1', (turn) => { secondCalled = true; return second.body(turn); }, { turnId: 't2' }),
    ];
    const settled = await Promise.race([runs[1]!.then(() => 'resolved', (e: unknown) => e), first.started.then(() => 'first started')]);
    const refusal = settled === 'first started' ? await runs[1]!.catch((e: unknown) => e) : settled;
    expect(refusal).toBeInstanceOf(FleetTurnRefusedError);
    expect(secondCalled).toBe(false);
    const turn = await first.started;
    expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't1', node: a.fleet.nodeId, status: 'running' });
    // The running turn is still owned by A: a stop from B reaches it and is acknowledged.
    const answer = await b.fleet.stop('s1', { timeoutMs: 5000 });
    expect(answer).toMatchObject({ outcome: 'stopped', turnId: 't1', node: a.fleet.nodeId });
    expect(turn.signal.aborted).toBe(true);
    expect(await runs[0]).toMatchObject({ status: 'cancelled', turnId: 't1' });
    expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'cancelled' });
  });

  it('two runs of one turn id at once on one node: one runs, the other is refused, and a stop from another instance reaches the one', async () => {
    const a = await instance('A');
    const b = await instance('B');
    const h = held();
    let calls = 0;
    const body = (turn: Turn) => { calls++; return h.body(turn); };
    const runs = [a.fleet.run('s1', body, { turnId: 't1' }), a.fleet.run('s1', body, { turnId: 't1' })];
    await expect(runs[1]).rejects.toThrow(TurnIdUsedError);
    await h.started;
    expect(await b.fleet.stop('s1', { timeoutMs: 5000 })).toMatchObject({ outcome: 'stopped', turnId: 't1' });
    expect(await runs[0]).toMatchObject({ status: 'cancelled', turnId: 't1' });
    expect(calls).toBe(1);
  });

  it('rejects bad arguments with TypeError/RangeError naming them, changing nothing', async () => {
    const a = await instance('A');
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    await expect(Fleet.start({ redis: {} as never, runner })).rejects.toThrow(/options.redis: expected a node-redis client/);
    await expect(Fleet.start({ redis: a.redis, runner: {} as never })).rejects.toThrow(/options.runner: expected a TurnRunner/);
    await expect(Fleet.start({ redis: a.redis, runner, leaseMs: -1 })).rejects.toThrow(RangeError);
    await expect(Fleet.start({ redis: a.redis, runner, leaseMs: 1000, renewMs: 1000 })).rejects.toThrow(/renewMs: expected less than leaseMs/);
    await expect(Fleet.start({ redis: a.redis, runner, onUnavailable: 'maybe' as never })).rejects.toThrow(/onUnavailable/);
    await expect(Fleet.start({ redis: a.redis, runner, nodeId: 'has space' })).rejects.toThrow(/nodeId/);
    await expect(a.fleet.run('', async () => 1)).rejects.toThrow(TypeError);
    await expect(a.fleet.run('s', 'x' as never)).rejects.toThrow(/body: expected a function/);
    await expect(a.fleet.stop('')).rejects.toThrow(TypeError);
    await expect(a.fleet.stop('s', { timeoutMs: -5 })).rejects.toThrow(/options.timeoutMs/);
    await expect(a.fleet.stop('s', { wait: 'yes' as never })).rejects.toThrow(/options.wait/);
    expect(await keysUnder(raw, prefix)).toEqual([]);
  });
});

describe('fullstop without redis', () => {
  it('no compiled module of the package loads `redis` at run time (fleet uses only the client it is given)', () => {
    const root = new URL('../dist/src/', import.meta.url).pathname;
    const files = readdirSync(root, { recursive: true }).map(String).filter((f) => f.endsWith('.js'));
    expect(files).toContain(join('fleet', 'fleet.js'));
    for (const f of files) {
      expect(readFileSync(join(root, f), 'utf8')).not.toMatch(/from ['"](redis|@redis\/[^'"]*)['"]|require\(['"](redis|@redis)/);
    }
    expect(readFileSync(join(root, 'index.js'), 'utf8')).not.toMatch(/fleet/);
  });
});
