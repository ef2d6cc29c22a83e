// P6: how fast a hard stop ends a SIGTERM-ignoring process tree, vs a raw group SIGKILL, and what
// each way of stopping leaves alive (fullstop, execa's `cancelSignal`, tree-kill alone).
import { setTimeout as delay } from 'node:timers/promises';
import { execa } from 'execa';
import treeKill from 'tree-kill';
import { TurnRegistry, type CancelToken } from '../src/index.js';
import { governStop, ownersOf } from '../src/token/owners.js';
import { compare, samplePairs, suiteOf, withTurn } from './harness.js';
import { alive, execTree, pidfile, pidsOf, reap, spawnTree, untilGone } from './trees.js';

/** The tree of five (shell, two sleeps, nested shell and its sleep), all ignoring SIGTERM. */
const IGNORES_TERM = `trap '' TERM
sleep 1000 & a=$!; sleep 1000 & b=$!
sh -c 'sleep 1000 & echo "$$ $!" > "$1.n.tmp" && mv "$1.n.tmp" "$1.n"; wait' n "$1" & n=$!
echo "$$ $a $b $n" > "$1.tmp" && mv "$1.tmp" "$1"
wait`;

/** A root that dies of SIGTERM, its sleep, and a setsid subtree (shell + sleep) ignoring SIGTERM. */
const SETSID_ESCAPE = `sleep 1000 & s=$!
setsid sh -c 'trap "" TERM; sleep 1000 & echo "$$ $!" > "$1.n.tmp" && mv "$1.n.tmp" "$1.n"; wait' n "$1" &
echo "$$ $s" > "$1.tmp" && mv "$1.tmp" "$1"
wait`;
const [GRACE_MS, registry] = [50, new TurnRegistry()];

/** `stop(token, pids)` of `script`'s tree under a fresh turn's token; on a failure, the tree is reaped. */
const underToken = <T>(script: string, stop: (token: CancelToken, pids: number[]) => Promise<T>) => withTurn(registry, 'bench', async (token) => {
  const { running, pids } = await execTree(script, { token, graceMs: GRACE_MS });
  try {
    const value = await stop(token, pids);
    await running;
    return value;
  } catch (error) {
    await reap(pids);
    throw error;
  }
});

/** fullstop: a governed stop sends SIGTERM; the clock starts when the runner, its grace over, would call the owner's hardStop(). */
const fullstopSample = () => underToken(IGNORES_TERM, async (token, pids) => {
  governStop(token);
  token.cancel();
  const start = performance.now();
  const stopped = ownersOf(token)[0]!.hardStop();
  await untilGone(pids);
  const goneMs = performance.now() - start;
  await stopped;
  return goneMs;
});

/** Raw: SIGTERM the tree's group, then time a group SIGKILL until every pid is gone. */
async function rawSample(): Promise<number> {
  const { child, exited, pids } = await spawnTree(IGNORES_TERM);
  try {
    process.kill(-child.pid!, 'SIGTERM');
    const start = performance.now();
    process.kill(-child.pid!, 'SIGKILL');
    await untilGone(pids);
    return performance.now() - start;
  } finally {
    await reap(pids);
    await exited;
  }
}

/** Ways of stopping `script`'s tree with a grace of GRACE_MS; each resolves with its pids once done. */
const stoppers: Record<string, (script: string) => Promise<number[]>> = {
  fullstop: (script) => underToken(script, async (token, pids) => (token.cancel(), pids)),
  async execaCancelSignal(script) {
    const [controller, file] = [new AbortController(), pidfile()];
    const running = execa('sh', ['-c', script, 'tree', file], { cancelSignal: controller.signal, forceKillAfterDelay: GRACE_MS, stdio: 'ignore', reject: false });
    const pids = await pidsOf(file, true);
    controller.abort();
    await running;
    await delay(GRACE_MS);
    return pids;
  },
  async treeKillAlone(script) {
    const { child, exited, pids } = await spawnTree(script, { detached: false });
    await new Promise((r) => treeKill(child.pid!, 'SIGTERM', r));
    await delay(GRACE_MS);
    await new Promise((r) => treeKill(child.pid!, 'SIGKILL', r));
    await exited;
    await delay(GRACE_MS);
    return pids;
  },
};

export const suite = suiteOf({
  async P6(ctx) {
    const samples = ctx.quick ? 2 : 40;
    // The warm-up pair pays for the first spawn and the first /proc walk.
    const { samples: s } = await samplePairs('P6', { pairs: samples, warmup: 1 }, { fullstop: fullstopSample, raw: rawSample }, ctx);
    const survivors: Record<string, Record<string, number>> = {};
    for (const [tree, script] of Object.entries({ ignoresTermTreeOfFive: IGNORES_TERM, setsidEscape: SETSID_ESCAPE })) {
      survivors[tree] = {};
      for (const [name, stopper] of Object.entries(stoppers)) {
        const pids = await stopper(script);
        await delay(GRACE_MS);
        survivors[tree]![name] = alive(pids).length; // alive a grace after the stopper is done
        await reap(pids);
      }
    }
    return compare({ id: 'P6', metric: 'SIGTERM-ignoring tree of five: end of grace → every pid gone', unit: 'ms',
      extra: { goal: '≤ 3×, ≤ 2 ms', samples, survivors, treePids: { ignoresTermTreeOfFive: 5, setsidEscape: 4 }, graceMs: GRACE_MS } },
    s.fullstop, ['process.kill(-pgid, SIGKILL)', s.raw]);
  },
});
