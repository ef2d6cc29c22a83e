// F1–F6 against the Redis at 127.0.0.1:6379 (REDIS_PORT); without one, no rows. Instances A (owner)
// and B (requester) live in this process; their runners keep no ledger: the rows measure the relay.
import { randomBytes } from 'node:crypto';
import { setImmediate, setTimeout as delay } from 'node:timers/promises';
import { createClient } from 'redis';
import { TurnRegistry, TurnRunner, type StopReport } from '../src/index.js';
import { Fleet, type FleetRedisClient } from '../src/fleet/index.js';
import { FleetHostProcess, redisAnswers } from '../examples/fleet-process.js';
import { compare, median, samplePairs, suiteOf, summarize, type BenchResult, type SuiteContext } from './harness.js';

const PORT = Number(process.env.REDIS_PORT ?? 6379);
type Client = ReturnType<typeof createClient>;
const us = (ms: number) => ms * 1000;
const timedUs = async (fn: () => Promise<unknown>) => { const t0 = performance.now(); await fn(); return us(performance.now() - t0); };
const runner = () => new TurnRunner({ registry: new TurnRegistry() });

// The run's key prefix, the clients and instances it closes at the end, and A and B.
const prefix = `fullstop-bench:${process.pid}:${randomBytes(3).toString('hex')}`;
const [clients, fleets]: [Client[], Fleet[]] = [[], []];
let fleetA: Fleet, fleetB: Fleet, rtt: number; // rtt: F1/F2's EVALSHA round trip, F3's unit

/** A turn on `fleet` that lasts until its signal aborts, once its body runs; `aborted`: performance.now() then. */
const heldTurn = (fleet: Fleet, session: string, turnId?: string) => new Promise<{ aborted: Promise<number>; done: Promise<unknown> }>((running) => {
  const done = fleet.run(session, (turn) => new Promise((end) => {
    const aborted = new Promise<number>((r) => turn.signal.addEventListener('abort', () => { r(performance.now()); end(0); }, { once: true }));
    running({ aborted, done }); // the body runs after fleet.run's first await, so `done` is set
  }), { turnId });
});

async function client(from?: Client): Promise<Client> {
  const c = from?.duplicate() ?? createClient({ socket: { host: '127.0.0.1', port: PORT } });
  clients.push(c.on('error', () => {}));
  return c.connect();
}

async function fleet(nodeId: string, redis: FleetRedisClient | Client, options = {}): Promise<Fleet> {
  fleets.push(await Fleet.start({ redis: redis as FleetRedisClient, runner: runner(), nodeId, prefix, ...options }));
  return fleets.at(-1)!;
}

/** F1, F2: a stop relayed from B to A, against the raw floors; also the EVALSHA round trip. */
async function relayRows(ctx: SuiteContext): Promise<BenchResult[]> {
  // Raw floor connections: x requests, y subscribes (the owner), z answers, w subscribes (the requester).
  const [x, z] = [await client(), await client()];
  const [y, w] = [await client(x), await client(z)];
  const sha = await x.sendCommand(['SCRIPT', 'LOAD', 'return 1']) as string;
  let onFloor: (() => void) | undefined, onAck: (() => void) | undefined;
  await y.subscribe(`${prefix}:raw:owner`, () => { if (onAck !== undefined) void z.sendCommand(['PUBLISH', `${prefix}:raw:requester`, 'ack']); onFloor?.(); });
  await w.subscribe(`${prefix}:raw:requester`, () => onAck?.());
  const rawOnce = async (withAck: boolean): Promise<number> => {
    const t0 = performance.now();
    const delivered = new Promise<void>((r) => { if (withAck) onAck = r; else onFloor = r; });
    await x.sendCommand(['EVALSHA', sha, '0']);
    await x.sendCommand(['PUBLISH', `${prefix}:raw:owner`, 'stop']);
    await delivered;
    onFloor = onAck = undefined;
    return us(performance.now() - t0);
  };
  let turn = 0;
  const { samples: s } = await samplePairs('F1/F2', { pairs: ctx.quick ? 30 : 200, warmup: 5 }, { // warm-up: scripts cached, JIT settled
    fleet: async () => {
      const h = await heldTurn(fleetA, 'f1', `f1-${turn++}`);
      // Stop a running turn, not one still starting: else B's command (node-redis writes at
      // setImmediate) waits behind the rest of A's start, which the idle floor connections never pay.
      await setImmediate();
      const t0 = performance.now();
      const answer$ = fleetB.stop('f1', { timeoutMs: 5000 });
      const abortedAt = await h.aborted;
      const answer = await answer$;
      const answeredAt = performance.now();
      await h.done;
      if (answer.outcome !== 'stopped') throw new Error(`F1: expected stopped, got ${answer.outcome}`);
      return { f1: us(abortedAt - t0), f2: us(answeredAt - t0), aPart: us((answer.report as StopReport).emittedAt) };
    },
    floor: () => rawOnce(false), ackFloor: () => rawOnce(true), rtt: () => timedUs(() => x.sendCommand(['EVALSHA', sha, '0'])),
  }, ctx);
  const [f2, aPart] = [s.fleet.map((f) => f.f2), s.fleet.map((f) => f.aPart)];
  rtt = median(s.rtt);
  return [
    compare({ id: 'F1', metric: 'fleetB.stop() → A\'s token.signal aborts', unit: 'µs', extra: { goal: 'ratio ≤ 1.25 and median ≤ 2000 µs', evalshaRoundTripMedianUs: rtt } },
      s.fleet.map((f) => f.f1), ['EVALSHA round trip + PUBLISH to another connection', s.floor], { paired: false }),
    compare({ id: 'F2', metric: 'fleetB.stop() → B holds `stopped`', unit: 'µs',
      extra: { aStopSequence: summarize(aPart), relayPart: { median: median(f2) - median(aPart) }, floorF1MedianUs: median(s.floor) } },
    f2, ['raw request + ack (EVALSHA, PUBLISH, PUBLISH back)', s.ackFloor], { paired: false }),
  ];
}

/** F3, F4: what the fleet adds to a turn, one at a time and 100 sessions at once. */
async function overheadRows(ctx: SuiteContext): Promise<BenchResult[]> {
  const plainRunner = runner();
  // F3 on an instance whose client counts the commands it sends.
  const counted = await client();
  const send = counted.sendCommand.bind(counted);
  let [commands, perTurn] = [0, 0];
  const fleetC = await fleet('bench-c', Object.assign(counted, { sendCommand: (...args: Parameters<typeof send>) => (commands++, send(...args)) }));
  const { samples: f3 } = await samplePairs('F3', { pairs: ctx.quick ? 60 : 400, warmup: 10 }, {
    fleet: async (warmup) => {
      const before = commands;
      const t = await timedUs(() => fleetC.run('f3', async () => 1));
      if (!warmup) perTurn = Math.max(perTurn, commands - before);
      return t;
    },
    plain: () => timedUs(() => plainRunner.run('f3', async () => 1)),
  }, ctx);
  const added = median(f3.fleet) - median(f3.plain);
  const f3Row = compare({ id: 'F3', metric: 'fleet.run vs runner.run, empty turn', unit: 'µs',
    extra: { goal: '≤ 2 Redis round trips added', redisCommandsPerTurn: perTurn, awaitedRoundTrips: 2, addedUs: added, addedInEvalshaRoundTrips: added / rtt } },
  f3.fleet, ['runner.run (no fleet)', f3.plain], { paired: false });
  const [sessions, each] = [100, ctx.quick ? 3 : 10];
  /** Turns/s of `sessions` sessions running `each` turns one after another, all at once. */
  const burst = (runTurn: (s: string) => Promise<unknown>) => async () => {
    const took = await timedUs(() => Promise.all(Array.from({ length: sessions }, async (_, s) => { for (let k = 0; k < each; k++) await runTurn(`f4-${s}`); })));
    return (sessions * each) / (took / 1e6);
  };
  const { samples: f4 } = await samplePairs('F4', { pairs: ctx.quick ? 3 : 5, warmup: 0 },
    { fleet: burst((s) => fleetA.run(s, async () => 1)), plain: burst((s) => plainRunner.run(s, async () => 1)) }, ctx);
  return [f3Row, compare({ id: 'F4', metric: `turns/s, ${sessions} sessions at once, empty turns`, unit: 'turns/s', better: 'higher' },
    f4.fleet, ['runner.run (no fleet)', f4.plain], { paired: false })];
}

/** F5: a stop whose wake-up publish is lost, recovered by the owner's renewal. */
async function lostWakeUp(ctx: SuiteContext): Promise<BenchResult> {
  const renewMs = 200;
  // A's subscriber (its client's duplicate) points at port 0, where nothing can listen: every publish to it is lost.
  const deaf = Object.assign(await client(), { duplicate: () => createClient({ socket: { host: '127.0.0.1', port: 0, reconnectStrategy: () => 1000 } }) });
  const fleetD = await fleet('bench-deaf', deaf as unknown as FleetRedisClient, { leaseMs: 2000, renewMs });
  const { samples: f5 } = await samplePairs('F5', { pairs: ctx.quick ? 2 : 15, warmup: 0 }, {
    ms: async () => {
      const h = await heldTurn(fleetD, 'f5');
      await delay(Math.random() * renewMs); // a random phase against the renewal timer, as a real stop has
      const t0 = performance.now();
      const answer = await fleetB.stop('f5', { wait: false });
      if (answer.outcome !== 'cancelling') throw new Error(`F5: expected cancelling, got ${answer.outcome}`);
      const ms = await h.aborted - t0;
      await h.done;
      return ms;
    },
  }, ctx);
  return compare({ id: 'F5', metric: 'lost wake-up: stop recorded → owner aborts (via renewal)', unit: 'ms', extra: { bound: 'renewMs', renewMs } },
    f5.ms, ['renewMs', [renewMs]], { paired: false });
}

/** F6: a dead owner's turn, marked interrupted by another instance's sweep. */
async function deadOwner(ctx: SuiteContext): Promise<BenchResult> {
  const [leaseMs, sweepMs] = [500, 100];
  const fleetE = await fleet('bench-sweeper', await client(), { leaseMs: 5000, sweepMs });
  let i = 0;
  const { samples: f6 } = await samplePairs('F6', { pairs: ctx.quick ? 1 : 8, warmup: 0 }, {
    ms: async () => {
      const session = `f6-${++i}`;
      const host = new FleetHostProcess({ prefix, nodeId: `bench-owner-${i}`, port: PORT, leaseMs, renewMs: leaseMs / 3, sweepMs: 60_000 });
      try {
        await host.next((m) => m.type === 'ready');
        host.send({ cmd: 'run', sessionId: session });
        await host.next((m) => m.type === 'started');
        const t0 = performance.now();
        await host.kill();
        while ((await fleetE.turn(session))?.status !== 'interrupted') {
          if (performance.now() - t0 > 10 * (leaseMs + sweepMs)) throw new Error('F6: the turn was never swept');
          await delay(2);
        }
        return performance.now() - t0;
      } finally {
        await host.kill();
      }
    },
  }, ctx);
  return compare({ id: 'F6', metric: 'dead owner: SIGKILL → turn interrupted by another\'s sweep', unit: 'ms', extra: { bound: 'leaseMs + sweepMs', leaseMs, sweepMs } },
    f6.ms, ['leaseMs + sweepMs', [leaseMs + sweepMs]], { paired: false });
}

export const suite = suiteOf({
  'F1 F2 F3 F4': async (ctx) => [...(await relayRows(ctx)), ...(await overheadRows(ctx))], F5: lostWakeUp, F6: deadOwner,
}, async (ctx, rows) => {
  const startOne = `redis-server --port ${PORT} --save '' --daemonize yes`;
  if (!(await redisAnswers(PORT))) return ctx.progress(`no Redis at 127.0.0.1:${PORT} — F1–F6 skipped (start one: ${startOne})`), [];
  try {
    [fleetA, fleetB] = [await fleet('bench-a', await client()), await fleet('bench-b', await client())];
    return await rows();
  } finally {
    for (const f of fleets) await f.close();
    for await (const keys of clients[0]?.scanIterator({ MATCH: `${prefix}:*`, COUNT: 1000 }) ?? []) if (keys.length > 0) await clients[0]!.del(keys);
    for (const c of clients) c.destroy();
  }
});
