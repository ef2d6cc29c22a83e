// S1-0, S1-1000: how long one stop holds the event loop with N extra idle processes on the host,
// vs a raw `process.kill(-pgid, 'SIGTERM')` of the same tree (docs/benchmarks.md, "S1").
import { readdirSync } from 'node:fs';
import { TurnRegistry } from '../src/index.js';
import { compare, median, samplePairs, suiteOf, withTurn, type BenchResult, type SuiteContext } from './harness.js';
import { execTree, reap, spawnTree } from './trees.js';

/** A shell and its sleep; on SIGTERM the shell reaps its child first (no orphan left as a zombie). */
const DIES_ON_TERM = `sleep 1000 & s=$!
trap 'kill $s 2>/dev/null; wait; exit 143' TERM
echo "$$ $s" > "$1.tmp" && mv "$1.tmp" "$1"
wait`;

/** `n` idle processes: a shell and `n` sleeps, which it reaps on SIGTERM (this host's init leaves orphans as zombies). */
const IDLE = (n: number) => `trap 'kill $pids 2>/dev/null; wait; exit 0' TERM
i=0; pids=; while [ $i -lt ${n} ]; do sleep 100000 & pids="$pids $!"; i=$((i+1)); done
echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; wait`;
const processCpuMs = () => (({ user, system }) => (user + system) / 1000)(process.cpuUsage());

/** The longest stretch between two event-loop turns until `start()` settles, ms: `block` min(wall gap, process CPU), each blind to what the other counts. */
async function blockOf(start: () => Promise<unknown>): Promise<{ block: number; wall: number }> {
  let [settled, wall, block] = [false, 0, 0];
  let [lastWall, lastCpu] = [performance.now(), processCpuMs()];
  start().then(() => { settled = true; }, () => { settled = true; });
  do {
    await new Promise((r) => setImmediate(r));
    const [t, c] = [performance.now(), processCpuMs()];
    wall = Math.max(wall, t - lastWall);
    block = Math.max(block, Math.min(t - lastWall, c - lastCpu));
    [lastWall, lastCpu] = [performance.now(), processCpuMs()];
  } while (!settled);
  return { block, wall };
}

async function stopBlockRow(ctx: SuiteContext, n: number): Promise<BenchResult> {
  const [pairs, registry] = [ctx.quick ? 3 : 30, new TurnRegistry()];
  const idle = n > 0 ? await spawnTree(IDLE(n), { nested: false }) : undefined;
  try {
    const hostProcesses = readdirSync('/proc').filter((e) => /^\d+$/.test(e)).length;
    const { samples } = await samplePairs(`S1-${n}`, { pairs, warmup: 1 }, {
      fullstop: () => withTurn(registry, 's1', async (token) => {
        const { running, pids } = await execTree(DIES_ON_TERM, { token, graceMs: 5000 }, false);
        const f = await blockOf(() => { token.cancel(); return running; });
        await reap(pids);
        return f;
      }),
      raw: async () => {
        const { child, exited, pids } = await spawnTree(DIES_ON_TERM, { nested: false });
        const r = await blockOf(() => { process.kill(-child.pid!, 'SIGTERM'); return exited; });
        await reap(pids);
        return r.block;
      },
    }, ctx);
    return compare({ id: `S1-${n}`, metric: `event-loop block of one exec stop, ${n} extra idle processes`, unit: 'ms',
      extra: { goal: '≤ 1 ms, flat in N', idleProcesses: n, hostProcesses, pairs, measure: 'longest stretch between two event-loop turns: min(wall, process CPU)',
        wallGapMedianMs: median(samples.fullstop.map((f) => f.wall)) } },
    samples.fullstop.map((f) => f.block), ['raw process.kill(-pgid, SIGTERM)', samples.raw]);
  } finally {
    idle?.child.kill('SIGTERM');
    await idle?.exited;
  }
}

export const suite = suiteOf({ 'S1-0': (ctx) => stopBlockRow(ctx, 0), 'S1-1000': (ctx) => stopBlockRow(ctx, 1000) });
