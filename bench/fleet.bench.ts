/**
 * F1–F6: fullstop/fleet against the shared Redis at 127.0.0.1:6379 (REDIS_PORT to change it).
 * Without Redis the suite says so and gives no rows.
 *
 * Instances A (owner) and B (requester) live in this process, each with its own client and
 * subscriber connection (their runners keep no ledger: the rows measure the relay, not fdatasync).
 * Raw sides, sampled in the same rounds, alternating with the fleet's samples:
 * - F1 `fleetB.stop()` → A's `token.signal` aborts, vs the floor: one `EVALSHA` round trip (a
 *   loaded `return 1`) then one `PUBLISH` delivered to a subscriber on another connection.
 * - F2 `fleetB.stop()` → B holds `stopped`, vs a raw request/ack: that floor, then the subscriber's
 *   side publishes back (on a third connection) to a subscriber of the requester. `extra` has the
 *   part that is A's stop sequence (`report.emittedAt`).
 * - F3 `fleet.run` vs `runner.run` of an empty turn, one at a time; `extra` has the Redis commands
 *   a fleet turn sends and the added time in EVALSHA round trips.
 * - F4 turns/s with 100 sessions running empty turns at once, `fleet.run` vs `runner.run`.
 * - F5 lost wake-up: a stop whose publish reaches nobody (A's subscriber points at a closed port),
 *   stop recorded → A's signal aborts, vs `renewMs` (the bound: one renewal).
 * - F6 dead owner: A in a child process (examples/fleet-host.ts) SIGKILLed mid-turn → B's sweep
 *   marks the turn `interrupted` (polled every 2 ms), vs `leaseMs + sweepMs` (the bound).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { createClient } from 'redis';
import { TurnRegistry, TurnRunner, type StopReport, type Turn } from '../src/index.js';
import { Fleet, type FleetRedisClient } from '../src/fleet/index.js';
import { FleetHostProcess, redisAnswers } from '../examples/fleet-process.js';
import { compare, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';

const PORT = Number(process.env.REDIS_PORT ?? 6379);
async function connected() {
  const c = createClient({ socket: { host: '127.0.0.1', port: PORT } });
  c.on('error', () => {});
  await c.connect();
  return c;
}
type Client = Awaited<ReturnType<typeof connected>>;

/** A body that runs until its turn's signal aborts; `aborted` resolves with performance.now() then. */
function heldTurn(): { body: (turn: Turn) => Promise<number>; started: Promise<void>; aborted: Promise<number> } {
  let started!: () => void;
  let aborted!: (at: number) => void;
  return {
    started: new Promise((r) => { started = r; }),
    aborted: new Promise((r) => { aborted = r; }),
    body: (turn) => new Promise((resolve) => {
      turn.signal.addEventListener('abort', () => { aborted(performance.now()); resolve(0); }, { once: true });
      started();
    }),
  };
}

const us = (ms: number) => ms * 1000;

/** A client whose subscriber (its duplicate) can never connect: every publish to it is lost. */
async function deafClient(real: Client): Promise<FleetRedisClient> {
  const closedPort = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => { const p = (s.address() as { port: number }).port; s.close(() => resolve(p)); });
  });
  const r = real as unknown as FleetRedisClient;
  return {
    get isOpen() { return r.isOpen; },
    get isReady() { return r.isReady; },
    connect: () => r.connect(),
    duplicate: (o) => {
      const sub = createClient({ name: o?.name, socket: { host: '127.0.0.1', port: closedPort, reconnectStrategy: () => 1000 } });
      return sub as unknown as FleetRedisClient;
    },
    sendCommand: (args, o) => r.sendCommand(args, o),
    subscribe: (c, l) => r.subscribe(c, l),
    unsubscribe: (c, l) => r.unsubscribe(c, l),
    destroy: () => r.destroy(),
    on: (e, l) => r.on(e, l),
    off: (e, l) => r.off(e, l),
  };
}

async function dropPrefix(c: Client, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await c.sendCommand(['SCAN', cursor, 'MATCH', `${prefix}:*`, 'COUNT', '1000']) as [string, string[]];
    cursor = next;
    if (keys.length > 0) await c.sendCommand(['DEL', ...keys]);
  } while (cursor !== '0');
}

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  if (!(await redisAnswers(PORT))) {
    ctx.progress(`fleet: no Redis at 127.0.0.1:${PORT} — F1–F6 skipped (start one: redis-server --port ${PORT} --save '' --daemonize yes)`);
    return [];
  }
  const wants = (id: string) => ctx.wants?.(id) ?? true;
  const prefix = `fullstop-bench:${process.pid}:${randomBytes(3).toString('hex')}`;
  const clients: Client[] = [];
  const fleets: Fleet[] = [];
  const client = async () => { const c = await connected(); clients.push(c); return c; };
  const rows: BenchResult[] = [];
  try {
    const runnerA = new TurnRunner({ registry: new TurnRegistry() });
    const runnerB = new TurnRunner({ registry: new TurnRegistry() });
    const fleetA = await Fleet.start({ redis: await client(), runner: runnerA, nodeId: 'bench-a', prefix });
    const fleetB = await Fleet.start({ redis: await client(), runner: runnerB, nodeId: 'bench-b', prefix });
    fleets.push(fleetA, fleetB);

    // Raw floor connections: x requests, y subscribes (the owner), z answers, w subscribes (the requester).
    const [x, z] = [await client(), await client()];
    const y = (await client()).duplicate(); y.on('error', () => {}); await y.connect(); clients.push(y);
    const w = (await client()).duplicate(); w.on('error', () => {}); await w.connect(); clients.push(w);
    const sha = await x.sendCommand(['SCRIPT', 'LOAD', 'return 1']) as string;
    let onFloor: (() => void) | undefined;
    let onAck: (() => void) | undefined;
    await y.subscribe(`${prefix}:raw:owner`, () => { if (onAck !== undefined) void z.sendCommand(['PUBLISH', `${prefix}:raw:requester`, 'ack']); onFloor?.(); });
    await w.subscribe(`${prefix}:raw:requester`, () => onAck?.());

    const rawOnce = async (withAck: boolean): Promise<number> => {
      const t0 = performance.now();
      const delivered = new Promise<void>((r) => { if (withAck) onAck = r; else onFloor = r; });
      await x.sendCommand(['EVALSHA', sha, '0']);
      await x.sendCommand(['PUBLISH', `${prefix}:raw:owner`, 'stop']);
      await delivered;
      onFloor = undefined; onAck = undefined;
      return performance.now() - t0;
    };

    // F1/F2: interleaved samples.
    if (wants('F1') || wants('F2') || wants('F3')) {
      const samples = ctx.quick ? 40 : 200;
      ctx.progress(`F1/F2 fleetB.stop() → A aborts / B holds stopped, ${samples} samples`);
      const f1: number[] = [], f2: number[] = [], floor: number[] = [], ackFloor: number[] = [], aPart: number[] = [], rtt: number[] = [];
      for (let i = 0; i < samples + 5; i++) {
        const h = heldTurn();
        const turn$ = fleetA.run('f1', h.body, { turnId: `f1-${i}` });
        await h.started;
        const t0 = performance.now();
        const answer$ = fleetB.stop('f1', { timeoutMs: 5000 });
        const abortedAt = await h.aborted;
        const answer = await answer$;
        const answeredAt = performance.now();
        await turn$;
        if (answer.outcome !== 'stopped') throw new Error(`F1: expected stopped, got ${answer.outcome}`);
        const f = await rawOnce(false);
        const a = await rawOnce(true);
        const t1 = performance.now();
        await x.sendCommand(['EVALSHA', sha, '0']);
        const r = performance.now() - t1;
        if (i < 5) continue; // warm-up: scripts cached, JIT settled
        f1.push(us(abortedAt - t0)); f2.push(us(answeredAt - t0)); floor.push(us(f)); ackFloor.push(us(a));
        aPart.push(us((answer.report as StopReport).emittedAt)); rtt.push(us(r));
      }
      const floorMedian = summarize(floor).median;
      rows.push(compare({ id: 'F1', metric: 'fleetB.stop() → A\'s token.signal aborts', unit: 'µs', better: 'lower',
        extra: { goal: 'ratio ≤ 1.25 and median ≤ 2000 µs', evalshaRoundTripMedianUs: summarize(rtt).median } },
      f1, 'EVALSHA round trip + PUBLISH to another connection', floor));
      rows.push(compare({ id: 'F2', metric: 'fleetB.stop() → B holds `stopped`', unit: 'µs', better: 'lower',
        extra: { aStopSequence: summarize(aPart), relayPart: { median: summarize(f2).median - summarize(aPart).median }, floorF1MedianUs: floorMedian } },
      f2, 'raw request + ack (EVALSHA, PUBLISH, PUBLISH back)', ackFloor));

      // F3: one empty turn at a time.
      const turns = ctx.quick ? 100 : 400;
      ctx.progress(`F3 fleet.run vs runner.run, empty turn, ${turns} each`);
      let commands = 0;
      const counting = await client();
      const countingClient = new Proxy(counting, {
        get(target, key) {
          const v = Reflect.get(target, key, target) as unknown;
          if (key === 'sendCommand') return (...args: unknown[]) => { commands++; return (v as (...a: unknown[]) => unknown).apply(target, args); };
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      }) as unknown as FleetRedisClient;
      const runnerC = new TurnRunner({ registry: new TurnRegistry() });
      const fleetC = await Fleet.start({ redis: countingClient, runner: runnerC, nodeId: 'bench-c', prefix });
      fleets.push(fleetC);
      const plainRunner = new TurnRunner({ registry: new TurnRegistry() });
      const fleetTurn: number[] = [], plainTurn: number[] = [];
      let fleetCommands = 0;
      for (let i = 0; i < turns + 10; i++) {
        const before = commands;
        let t0 = performance.now();
        await fleetC.run('f3', async () => 1);
        const f = performance.now() - t0;
        const sent = commands - before;
        t0 = performance.now();
        await plainRunner.run('f3', async () => 1);
        const p = performance.now() - t0;
        if (i < 10) continue;
        fleetTurn.push(us(f)); plainTurn.push(us(p)); fleetCommands = Math.max(fleetCommands, sent);
      }
      const added = summarize(fleetTurn).median - summarize(plainTurn).median;
      rows.push(compare({ id: 'F3', metric: 'fleet.run vs runner.run, empty turn', unit: 'µs', better: 'lower',
        extra: { goal: '≤ 2 Redis round trips added', redisCommandsPerTurn: fleetCommands, awaitedRoundTrips: 2,
          addedUs: added, addedInEvalshaRoundTrips: added / summarize(rtt).median } },
      fleetTurn, 'runner.run (no fleet)', plainTurn));

      // F4: 100 sessions at once.
      const sessions = 100, each = ctx.quick ? 3 : 10, rounds = ctx.quick ? 3 : 5;
      ctx.progress(`F4 ${sessions} sessions × ${each} empty turns, ${rounds} rounds`);
      const fleetRate: number[] = [], plainRate: number[] = [];
      const burst = async (runTurn: (s: string) => Promise<unknown>) => {
        const t0 = performance.now();
        await Promise.all(Array.from({ length: sessions }, async (_, s) => { for (let k = 0; k < each; k++) await runTurn(`f4-${s}`); }));
        return (sessions * each) / ((performance.now() - t0) / 1000);
      };
      for (let r = 0; r < rounds; r++) {
        fleetRate.push(await burst((s) => fleetA.run(s, async () => 1)));
        plainRate.push(await burst((s) => plainRunner.run(s, async () => 1)));
      }
      rows.push(compare({ id: 'F4', metric: `turns/s, ${sessions} sessions at once, empty turns`, unit: 'turns/s', better: 'higher' },
        fleetRate, 'runner.run (no fleet)', plainRate));
    }

    if (wants('F5')) {
      const renewMs = 200;
      const samples = ctx.quick ? 5 : 15;
      ctx.progress(`F5 lost wake-up: stop with no subscriber → abort, renewMs ${renewMs}, ${samples} samples`);
      const runnerD = new TurnRunner({ registry: new TurnRegistry() });
      const fleetD = await Fleet.start({ redis: await deafClient(await client()), runner: runnerD, nodeId: 'bench-deaf', prefix, leaseMs: 2000, renewMs });
      fleets.push(fleetD);
      const recovery: number[] = [];
      for (let i = 0; i < samples; i++) {
        const h = heldTurn();
        const turn$ = fleetD.run('f5', h.body);
        await h.started;
        // A random phase against the renewal timer, as a real stop has.
        await new Promise((r) => setTimeout(r, Math.random() * renewMs));
        const t0 = performance.now();
        const answer = await fleetB.stop('f5', { wait: false });
        if (answer.outcome !== 'cancelling') throw new Error(`F5: expected cancelling, got ${answer.outcome}`);
        recovery.push(await h.aborted - t0);
        await turn$;
      }
      rows.push(compare({ id: 'F5', metric: 'lost wake-up: stop recorded → owner aborts (via renewal)', unit: 'ms', better: 'lower',
        extra: { bound: 'renewMs', renewMs } }, recovery, 'renewMs', [renewMs]));
    }

    if (wants('F6')) {
      const leaseMs = 500, sweepMs = 100;
      const samples = ctx.quick ? 3 : 8;
      ctx.progress(`F6 dead owner: SIGKILL → interrupted, leaseMs ${leaseMs} + sweepMs ${sweepMs}, ${samples} samples`);
      const runnerE = new TurnRunner({ registry: new TurnRegistry() });
      const fleetE = await Fleet.start({ redis: await client(), runner: runnerE, nodeId: 'bench-sweeper', prefix, leaseMs: 5000, sweepMs });
      fleets.push(fleetE);
      const recovery: number[] = [];
      for (let i = 0; i < samples; i++) {
        const host = new FleetHostProcess({ prefix, nodeId: `bench-owner-${i}`, port: PORT, leaseMs, renewMs: leaseMs / 3, sweepMs: 60_000 });
        try {
          await host.next((m) => m.type === 'ready');
          host.send({ cmd: 'run', sessionId: `f6-${i}` });
          await host.next((m) => m.type === 'started');
          const t0 = performance.now();
          await host.kill();
          for (;;) {
            if ((await fleetE.turn(`f6-${i}`))?.status === 'interrupted') break;
            if (performance.now() - t0 > 10 * (leaseMs + sweepMs)) throw new Error('F6: the turn was never swept');
            await new Promise((r) => setTimeout(r, 2));
          }
          recovery.push(performance.now() - t0);
        } finally {
          await host.kill();
        }
      }
      rows.push(compare({ id: 'F6', metric: 'dead owner: SIGKILL → turn interrupted by another\'s sweep', unit: 'ms', better: 'lower',
        extra: { bound: 'leaseMs + sweepMs', leaseMs, sweepMs } }, recovery, 'leaseMs + sweepMs', [leaseMs + sweepMs]));
    }
    return rows;
  } finally {
    for (const f of fleets) await f.close();
    if (clients[0] !== undefined) await dropPrefix(clients[0], prefix);
    for (const c of clients) c.destroy();
  }
}

export const suite: Suite = { name: 'fleet', ids: ['F1', 'F2', 'F3', 'F4', 'F5', 'F6'], run };
