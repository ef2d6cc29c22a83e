// F7: many instances over Redis Cluster against one Redis, in the same run. 8 instance processes
// (bench/fleet-instance.ts) each run 1,000 held turns; stops of random sessions are sent to random
// instances; measured: stop sent → the owner's turn_aborted, and Redis commands per turn. Needs the
// local cluster (scripts/redis-cluster.sh start) and the Redis at 127.0.0.1:6379; else no rows.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createClient } from 'redis';
import { redisAnswers } from '../examples/fleet-process.js';
import { SCRIPTS } from '../src/fleet/scripts.js';
import { compare, quantile, suiteOf, type SuiteContext } from './harness.js';

const SINGLE_PORT = Number(process.env.REDIS_PORT ?? 6379);
const CLUSTER_PORT = Number(process.env.REDIS_CLUSTER_PORT ?? 7100);
const CLUSTER_PORTS = Array.from({ length: 6 }, (_, i) => CLUSTER_PORT + i);
const INSTANCE = fileURLToPath(new URL('./fleet-instance.js', import.meta.url));
const now = () => performance.timeOrigin + performance.now();

type Message = { type: string; [k: string]: any };

/** One instance process, with a wait for its next message of a kind. */
class Instance {
  readonly child: ChildProcess;
  readonly #waiters: Array<{ match: (m: Message) => boolean; resolve: (m: Message) => void }> = [];
  constructor(config: object, onMessage: (m: Message) => void) {
    this.child = fork(INSTANCE, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m: Message) => {
      onMessage(m);
      const i = this.#waiters.findIndex((w) => w.match(m));
      if (i >= 0) this.#waiters.splice(i, 1)[0]!.resolve(m);
    });
  }
  next(match: (m: Message) => boolean): Promise<Message> {
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }
  send(m: object): void { this.child.send(m); }
}

/** One mode's run: instances × sessions turns, `stops` stops; latencies (ms) and commands per turn. */
async function measure(cluster: boolean, ctx: SuiteContext): Promise<{ ms: number[]; perStart: number; perStop: number }> {
  const [instances, sessions, stops] = ctx.quick ? [2, 100, 50] : [8, 1000, 800];
  const prefix = `fullstop-bench-f7:${process.pid}:${randomBytes(3).toString('hex')}`;
  const abortedAt = new Map<string, number>();
  const arrived = new Map<string, () => void>();
  const nodes = Array.from({ length: instances }, (_, i) => new Instance(
    { prefix, nodeId: `f7-${i}`, ports: cluster ? CLUSTER_PORTS : [SINGLE_PORT], cluster },
    (m) => { if (m.type === 'aborted') { abortedAt.set(m.sessionId, m.at); arrived.get(m.sessionId)?.(); } }));
  try {
    await Promise.all(nodes.map((n) => n.next((m) => m.type === 'ready')));
    // Every server has the scripts cached, as in a warm deployment: a cold cache costs each script
    // one NOSCRIPT round trip per master, which is not per-turn work.
    await forEachNode(cluster, (c) => Promise.all(Object.values(SCRIPTS).map((x) => c.sendCommand(['SCRIPT', 'LOAD', x.source]))));
    const counts = async () => (await Promise.all(nodes.map(async (n) => { const c = n.next((m) => m.type === 'count'); n.send({ cmd: 'count' }); return (await c).commands as number; }))).reduce((a, b) => a + b, 0);
    const before = await counts();
    await Promise.all(nodes.map(async (n, i) => {
      const ok = n.next((m) => m.type === 'running' || m.type === 'error');
      n.send({ cmd: 'run', sessions: Array.from({ length: sessions }, (_, k) => `s-${i}-${k}`) });
      const m = await ok;
      if (m.type === 'error') throw new Error(`F7: ${m.message}`);
    }));
    ctx.progress(`F7 ${cluster ? 'cluster' : 'single'}: ${instances * sessions} turns running`);
    const started = await counts();
    const ms: number[] = [];
    const chosen = new Set<string>();
    while (chosen.size < stops) chosen.add(`s-${Math.floor(Math.random() * instances)}-${Math.floor(Math.random() * sessions)}`);
    let id = 0;
    const queue = [...chosen];
    // Four stops in flight at a time, each sent to a random instance.
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
        const via = nodes[Math.floor(Math.random() * instances)]!;
        const got = new Promise<void>((r) => arrived.set(s!, r));
        const mine = id++;
        const answered = via.next((m) => m.type === 'answer' && m.id === mine);
        const t0 = now();
        via.send({ cmd: 'stop', id: mine, sessionId: s });
        const answer = await answered;
        if (answer.outcome !== 'stopped') throw new Error(`F7: stop of ${s} answered ${answer.outcome}`);
        await got;
        ms.push(abortedAt.get(s)! - t0);
      }
    }));
    // Commands per turn started (index, register) and per stop (request_stop, record_end, unindex);
    // the leases are long enough that no renewal falls in the run.
    const perStart = (started - before) / (instances * sessions);
    const perStop = ((await counts()) - started) / stops;
    return { ms, perStart, perStop };
  } finally {
    await Promise.all(nodes.map(async (n) => {
      const exited = new Promise((r) => n.child.once('exit', r));
      n.send({ cmd: 'close' });
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000).unref())]);
      n.child.kill('SIGKILL');
      await exited;
    }));
    await dropKeys(prefix, cluster);
  }
}

/** `fn` on a connection to each master (the one Redis, or each of the cluster's). */
type Node = ReturnType<typeof createClient>;

async function forEachNode(cluster: boolean, fn: (c: Node) => Promise<unknown>): Promise<void> {
  for (const port of cluster ? CLUSTER_PORTS : [SINGLE_PORT]) {
    const c: Node = createClient({ socket: { host: '127.0.0.1', port } });
    c.on('error', () => {});
    await c.connect();
    try {
      if (!/role:slave/.test(String(await c.sendCommand(['INFO', 'replication'])))) await fn(c);
    } finally {
      c.destroy();
    }
  }
}

async function dropKeys(prefix: string, cluster: boolean): Promise<void> {
  await forEachNode(cluster, async (c) => {
    for await (const keys of c.scanIterator({ MATCH: `${prefix}:*`, COUNT: 1000 })) for (const k of keys) await c.del(k);
  });
}

export const suite = suiteOf({
  F7: async (ctx) => {
    const single = await measure(false, ctx);
    const cluster = await measure(true, ctx);
    const p99 = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.99);
    const [instances, sessions] = ctx.quick ? [2, 100] : [8, 1000];
    return compare({
      id: 'F7', metric: `stop via a random instance → owner's turn_aborted, ${instances} instances × ${sessions} turns, Redis Cluster`, unit: 'ms',
      extra: {
        goal: 'cluster p99 ≤ 1.5 × single p99; commands per turn unchanged',
        clusterP99: p99(cluster.ms), singleP99: p99(single.ms), p99Ratio: p99(cluster.ms) / p99(single.ms),
        commandsPerTurnStart: { cluster: cluster.perStart, single: single.perStart },
        commandsPerStop: { cluster: cluster.perStop, single: single.perStop },
      },
    }, cluster.ms, ['the same on one Redis', single.ms], { paired: false });
  },
}, async (ctx, rows) => {
  const cluster = await redisAnswers(CLUSTER_PORT);
  if (!cluster || !(await redisAnswers(SINGLE_PORT))) {
    ctx.progress(`F7 skipped: needs Redis at 127.0.0.1:${SINGLE_PORT} and the cluster at ${CLUSTER_PORT}-${CLUSTER_PORT + 5} (scripts/redis-cluster.sh start)`);
    return [];
  }
  return rows();
});
