/**
 * P6: how fast a hard stop ends a process tree, and what each way of stopping leaves.
 *
 * - Time, for a tree of five that ignores SIGTERM, from the end of the grace window (the moment a
 *   runner's grace ends and it calls the owner's `hardStop()`) until every pid is gone (no /proc
 *   entry, or a zombie), against a raw `process.kill(-pgid, 'SIGKILL')` on the same kind of tree,
 *   in pairs. Both sides detect "gone" with the same poll.
 * - Survivors, on that tree and on one with a setsid escape, after fullstop's stop vs execa's
 *   `cancelSignal` vs tree-kill alone (SIGTERM, grace, SIGKILL), each with the same grace.
 *
 * Every tree writes its pids to a file (the handshake); whatever survives is SIGKILLed by pid at
 * the end of its sample, so the bench leaves nothing behind.
 */

import { execa } from 'execa';
import treeKill from 'tree-kill';
import { exec } from '../src/exec/index.js';
import { TurnRegistry } from '../src/index.js';
import { governStop, ownersOf } from '../src/token/owners.js';
import { compare, median, samplePairs, type Suite } from './harness.js';
import { alive, delay, pidsOf, reap, Scratch, spawnGroup, untilGone } from './trees.js';

/** The tree of five (shell, two sleeps, nested shell and its sleep), all ignoring SIGTERM. Pids in "$1" and "$1.n". */
const IGNORES_TERM = `trap '' TERM
sleep 1000 & a=$!; sleep 1000 & b=$!
sh -c 'sleep 1000 & echo "$$ $!" > "$1.n.tmp" && mv "$1.n.tmp" "$1.n"; wait' n "$1" & n=$!
echo "$$ $a $b $n" > "$1.tmp" && mv "$1.tmp" "$1"
wait`;

/** A root that dies of SIGTERM, its sleep, and a setsid subtree (shell + sleep) ignoring SIGTERM. Pids in "$1" and "$1.n". */
const SETSID_ESCAPE = `sleep 1000 & s=$!
setsid sh -c 'trap "" TERM; sleep 1000 & echo "$$ $!" > "$1.n.tmp" && mv "$1.n.tmp" "$1.n"; wait' n "$1" &
echo "$$ $s" > "$1.tmp" && mv "$1.tmp" "$1"
wait`;

const GRACE_MS = 50;
const registry = new TurnRegistry();
const scratch = () => (current ??= new Scratch());
let current: Scratch | undefined;

/** fullstop: a governed stop sends SIGTERM; the clock starts when the runner would call hardStop(). */
async function fullstopSample(): Promise<{ goneMs: number; resolvedMs: number }> {
  const token = registry.beginTurn('bench');
  const pidfile = scratch().pidfile();
  const running = exec('sh', ['-c', IGNORES_TERM, 'tree', pidfile], { token, graceMs: GRACE_MS });
  const pids = await pidsOf(pidfile);
  try {
    governStop(token);
    token.cancel();
    const start = performance.now();
    const stopped = ownersOf(token)[0]!.hardStop();
    await untilGone(pids);
    const goneMs = performance.now() - start;
    await stopped;
    const resolvedMs = performance.now() - start;
    await running;
    return { goneMs, resolvedMs };
  } finally {
    await reap(pids);
    registry.endTurn('bench', token);
  }
}

/** Raw: the same tree spawned detached by node; SIGTERM the group, then time a group SIGKILL. */
async function rawSample(): Promise<number> {
  const pidfile = scratch().pidfile();
  const { child, exited } = spawnGroup(IGNORES_TERM, pidfile);
  const pids = await pidsOf(pidfile);
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

/** A way of stopping `script`'s tree with a grace of GRACE_MS; returns the tree's pids once it is done. */
type Stopper = (script: string, pidfile: string) => Promise<number[]>;
const stoppers: Record<string, Stopper> = {
  async fullstop(script, pidfile) {
    const token = registry.beginTurn('bench-survivors');
    try {
      const running = exec('sh', ['-c', script, 'tree', pidfile], { token, graceMs: GRACE_MS });
      const pids = await pidsOf(pidfile);
      token.cancel();
      await running;
      return pids;
    } finally {
      registry.endTurn('bench-survivors', token);
    }
  },
  /** execa's own cancel: `cancelSignal`, SIGKILL after the same grace (`forceKillAfterDelay`). */
  async execaCancelSignal(script, pidfile) {
    const controller = new AbortController();
    const running = execa('sh', ['-c', script, 'tree', pidfile], { cancelSignal: controller.signal, forceKillAfterDelay: GRACE_MS, stdio: 'ignore', reject: false });
    const pids = await pidsOf(pidfile);
    controller.abort();
    await running;
    await delay(GRACE_MS);
    return pids;
  },
  /** tree-kill alone, used the polite way: SIGTERM the tree, wait the grace, SIGKILL the tree. */
  async treeKillAlone(script, pidfile) {
    const { child, exited } = spawnGroup(script, pidfile, false);
    const pids = await pidsOf(pidfile);
    await new Promise((r) => treeKill(child.pid!, 'SIGTERM', r));
    await delay(GRACE_MS);
    await new Promise((r) => treeKill(child.pid!, 'SIGKILL', r));
    await exited;
    await delay(GRACE_MS);
    return pids;
  },
};

/** Survivors of one stop: pids still alive a grace after the stopper is done (then reaped). */
async function survivors(stopper: Stopper, script: string): Promise<number> {
  const pids = await stopper(script, scratch().pidfile());
  await delay(GRACE_MS);
  const left = alive(pids).length;
  await reap(pids);
  return left;
}

/** Does execa's promise settle within 1 s of a cancel while escaped grandchildren hold its pipes? */
async function execaPipedSettles(): Promise<boolean> {
  const controller = new AbortController();
  const pidfile = scratch().pidfile();
  const running = execa('sh', ['-c', SETSID_ESCAPE, 'tree', pidfile], { cancelSignal: controller.signal, forceKillAfterDelay: GRACE_MS, reject: false });
  const pids = await pidsOf(pidfile);
  controller.abort();
  const settled = await Promise.race([running.then(() => true), delay(1000).then(() => false)]);
  await reap(pids);
  await running;
  return settled;
}

export const suite: Suite = {
  name: 'exec',
  ids: ['P6'],
  async run(ctx) {
    const samples = ctx.quick ? 3 : 40;
    try {
      // One warm-up pair, not recorded (first spawn, first /proc walk).
      const { samples: s } = await samplePairs('P6', { pairs: samples, warmup: 1 }, { fullstop: fullstopSample, raw: rawSample });
      ctx.progress(`exec: P6 ${samples} samples each side`);
      const trees = { ignoresTermTreeOfFive: IGNORES_TERM, setsidEscape: SETSID_ESCAPE };
      const counts: Record<string, Record<string, number>> = {};
      for (const [tree, script] of Object.entries(trees)) {
        counts[tree] = {};
        for (const [name, stopper] of Object.entries(stoppers)) counts[tree]![name] = await survivors(stopper, script);
      }
      ctx.progress('exec: survivor counts done');
      return [compare({
        id: 'P6', metric: 'SIGTERM-ignoring tree of five: end of grace → every pid gone', unit: 'ms', better: 'lower',
        extra: {
          goal: '≤ 3×, ≤ 2 ms', samples, survivors: counts, treePids: { ignoresTermTreeOfFive: 5, setsidEscape: 4 },
          fullstopHardStopResolvedMedianMs: median(s.fullstop.map((f) => f.resolvedMs)),
          execaPromiseSettlesWithin1sWhenEscapeesHoldPipes: await execaPipedSettles(), graceMs: GRACE_MS,
        },
      }, s.fullstop.map((f) => f.goneMs), 'process.kill(-pgid, SIGKILL)', s.raw, { paired: true })];
    } finally {
      current?.remove();
      current = undefined;
    }
  },
};
