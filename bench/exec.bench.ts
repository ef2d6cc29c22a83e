/**
 * P6: how fast a hard stop ends a process tree, and what each way of stopping leaves.
 *
 * - Time, for a tree of five that ignores SIGTERM, from the end of the grace window (the moment a
 *   runner's grace ends and it calls the owner's `hardStop()`) until every pid is gone (no /proc
 *   entry, or a zombie), against a raw `process.kill(-pgid, 'SIGKILL')` on the same kind of tree,
 *   samples interleaved. Both sides detect "gone" with the same poll.
 * - Survivors, on that tree and on one with a setsid escape, after fullstop's stop vs execa's
 *   `cancelSignal` vs tree-kill alone (SIGTERM, grace, SIGKILL), each with the same grace.
 *
 * S1-0, S1-1000: how long one stop holds the event loop — `token.cancel()` on a turn with one
 *   exec tree, until `exec` settles — on a host with N extra idle processes (spawned here), vs a
 *   raw `process.kill(-pgid, 'SIGTERM')` of the same kind of tree. The block is the longer of the
 *   synchronous part of the call and the longest gap between two `setImmediate` turns until the
 *   stop settles (goal ≤ 1 ms and flat in N: the stop's walk should cost the tree, not the host).
 *
 * Every tree writes its pids to a file (the handshake); whatever survives is SIGKILLed by pid at
 * the end of its sample, so the bench leaves nothing behind.
 */

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import treeKill from 'tree-kill';
import { exec } from '../src/exec/index.js';
import { TurnRegistry } from '../src/index.js';
import { governStop, ownersOf } from '../src/token/owners.js';
import { compare, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';

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
const HANDSHAKE_MS = 10_000;

/** Alive: a /proc entry that is not a zombie (`Z`) or dead (`X`). */
function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
const alive = (pids: readonly number[]) => pids.filter(isAlive);
const tick = () => new Promise<void>((r) => setImmediate(r));
const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Both sides' "gone" detector: poll every event-loop turn until no pid is alive. */
async function untilGone(pids: readonly number[]): Promise<void> {
  while (alive(pids).length > 0) await tick();
}

/** The handshake: the pids the tree wrote to `pidfile` (and `pidfile.n` when `nested`). */
async function pidsOf(pidfile: string, nested = true): Promise<number[]> {
  const files = nested ? [pidfile, `${pidfile}.n`] : [pidfile];
  const deadline = Date.now() + HANDSHAKE_MS;
  while (!files.every((f) => existsSync(f))) {
    if (Date.now() > deadline) throw new Error(`tree did not write ${pidfile}`);
    await delay(2);
  }
  const words = files.map((f) => readFileSync(f, 'utf8')).join(' ').trim().split(/\s+/);
  return [...new Set(words.map(Number))];
}

/** SIGKILL whatever of `pids` is still alive (the end of every sample). */
async function reap(pids: readonly number[]): Promise<void> {
  for (const pid of alive(pids)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  await untilGone(pids);
}

class Scratch {
  readonly dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-exec-'));
  #n = 0;
  pidfile(): string { return join(this.dir, `tree-${this.#n++}`); }
  remove(): void { rmSync(this.dir, { recursive: true, force: true }); }
}

/** One fullstop sample: a governed stop sends SIGTERM; the clock starts when the runner would call hardStop(). */
async function fullstopSample(registry: TurnRegistry, scratch: Scratch): Promise<{ goneMs: number; resolvedMs: number }> {
  const token = registry.beginTurn('bench');
  const pidfile = scratch.pidfile();
  const running = exec('sh', ['-c', IGNORES_TERM, 'tree', pidfile], { token, graceMs: GRACE_MS });
  const pids = await pidsOf(pidfile);
  try {
    governStop(token);
    token.cancel();
    const [owner] = ownersOf(token);
    const start = performance.now();
    const stopped = owner!.hardStop();
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

/** One raw sample: the same tree spawned detached by node; SIGTERM the group, then time a group SIGKILL. */
async function rawSample(scratch: Scratch): Promise<number> {
  const pidfile = scratch.pidfile();
  const child = spawn('sh', ['-c', IGNORES_TERM, 'tree', pidfile], { detached: true, stdio: 'ignore' });
  const exited = new Promise((r) => child.once('exit', r));
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

type Stopper = (script: string, pidfile: string) => Promise<number[]>;

/** fullstop: a token cancel with its own grace. Returns the tree's pids once the stop is over. */
function fullstopStopper(registry: TurnRegistry): Stopper {
  return async (script, pidfile) => {
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
  };
}

/** execa's own cancel: `cancelSignal`, SIGKILL after the same grace (`forceKillAfterDelay`). */
const execaStopper: Stopper = async (script, pidfile) => {
  const controller = new AbortController();
  const running = execa('sh', ['-c', script, 'tree', pidfile], {
    cancelSignal: controller.signal, forceKillAfterDelay: GRACE_MS, stdio: 'ignore', reject: false,
  });
  const pids = await pidsOf(pidfile);
  controller.abort();
  await running;
  await delay(GRACE_MS);
  return pids;
};

/** tree-kill alone, used the polite way: SIGTERM the tree, wait the grace, SIGKILL the tree. */
const treeKillStopper: Stopper = async (script, pidfile) => {
  const child = spawn('sh', ['-c', script, 'tree', pidfile], { stdio: 'ignore' });
  const exited = new Promise((r) => child.once('exit', r));
  const pids = await pidsOf(pidfile);
  await new Promise((r) => treeKill(child.pid!, 'SIGTERM', r));
  await delay(GRACE_MS);
  await new Promise((r) => treeKill(child.pid!, 'SIGKILL', r));
  await exited;
  await delay(GRACE_MS);
  return pids;
};

/** Survivors of one stop: pids still alive a grace after the stopper is done (then reaped). */
async function survivors(stopper: Stopper, script: string, scratch: Scratch): Promise<number> {
  const pids = await stopper(script, scratch.pidfile());
  await delay(GRACE_MS);
  const left = alive(pids).length;
  await reap(pids);
  return left;
}

/** Does execa's promise settle within 1 s of a cancel while escaped grandchildren hold its pipes? */
async function execaPipedSettles(scratch: Scratch): Promise<boolean> {
  const controller = new AbortController();
  const pidfile = scratch.pidfile();
  const running = execa('sh', ['-c', SETSID_ESCAPE, 'tree', pidfile], { cancelSignal: controller.signal, forceKillAfterDelay: GRACE_MS, reject: false });
  const pids = await pidsOf(pidfile);
  controller.abort();
  const settled = await Promise.race([running.then(() => true), delay(1000).then(() => false)]);
  await reap(pids);
  await running;
  return settled;
}

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  const rows: BenchResult[] = [];
  if (ctx.wants?.('P6') !== false) rows.push(await hardStopRow(ctx));
  for (const n of IDLE_COUNTS) if (ctx.wants?.(`S1-${n}`) !== false) rows.push(await stopBlockRow(ctx, n));
  return rows;
}

async function hardStopRow(ctx: SuiteContext): Promise<BenchResult> {
  const samples = ctx.quick ? 3 : 40;
  const registry = new TurnRegistry();
  const scratch = new Scratch();
  try {
    const fullstop: number[] = [];
    const resolved: number[] = [];
    const raw: number[] = [];
    // One warm-up of each, not recorded (first spawn, first /proc walk).
    await fullstopSample(registry, scratch);
    await rawSample(scratch);
    for (let i = 0; i < samples; i++) {
      const f = await fullstopSample(registry, scratch);
      fullstop.push(f.goneMs);
      resolved.push(f.resolvedMs);
      raw.push(await rawSample(scratch));
    }
    ctx.progress(`exec: P6 ${samples} samples each side`);
    const stoppers: Record<string, Stopper> = {
      fullstop: fullstopStopper(registry), execaCancelSignal: execaStopper, treeKillAlone: treeKillStopper,
    };
    const trees: Record<string, string> = { ignoresTermTreeOfFive: IGNORES_TERM, setsidEscape: SETSID_ESCAPE };
    const counts: Record<string, Record<string, number>> = {};
    for (const [treeName, script] of Object.entries(trees)) {
      counts[treeName] = {};
      for (const [name, stopper] of Object.entries(stoppers)) counts[treeName]![name] = await survivors(stopper, script, scratch);
    }
    ctx.progress('exec: survivor counts done');
    const piped = await execaPipedSettles(scratch);
    const sorted = [...resolved].sort((a, b) => a - b);
    return compare({
      id: 'P6',
      metric: 'SIGTERM-ignoring tree of five: end of grace → every pid gone',
      unit: 'ms',
      better: 'lower',
      extra: {
        samples,
        survivors: counts,
        treePids: { ignoresTermTreeOfFive: 5, setsidEscape: 4 },
        fullstopHardStopResolvedMedianMs: sorted[Math.floor(sorted.length / 2)],
        execaPromiseSettlesWithin1sWhenEscapeesHoldPipes: piped,
        graceMs: GRACE_MS,
      },
    }, fullstop, 'process.kill(-pgid, SIGKILL)', raw, { paired: true });
  } finally {
    scratch.remove();
  }
}

export const suite: Suite = { name: 'exec', ids: ['P6', 'S1-0', 'S1-1000'], run };

const IDLE_COUNTS = [0, 1000] as const;

/** S1's tree: a shell and its sleep; on SIGTERM the shell reaps its child first (no orphan left as a zombie). */
const DIES_ON_TERM = `sleep 1000 & s=$!
trap 'kill $s 2>/dev/null; wait; exit 143' TERM
echo "$$ $s" > "$1.tmp" && mv "$1.tmp" "$1"
wait`;

/**
 * `n` idle processes in a group of their own: a shell and `n` sleeps. The shell reaps them on
 * SIGTERM, because this host's init does not reap orphans (each would stay a zombie).
 */
async function idleProcesses(n: number): Promise<() => Promise<void>> {
  if (n === 0) return async () => {};
  const script = `trap 'kill $pids 2>/dev/null; wait; exit 0' TERM
i=0; pids=; while [ $i -lt ${n} ]; do sleep 100000 & pids="$pids $!"; i=$((i+1)); done; echo ready; wait`;
  const shell = spawn('sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise((r) => shell.once('exit', r));
  await new Promise<void>((resolve, reject) => {
    shell.stdout!.on('data', (d: Buffer) => { if (d.toString().includes('ready')) resolve(); });
    shell.once('exit', (code) => reject(new Error(`S1: the idle-process shell exited (${code}) before it was ready`)));
  });
  return async () => {
    shell.kill('SIGTERM');
    await exited;
  };
}

/**
 * The process's CPU time so far, in ms (getrusage: exact for the running thread, unlike
 * /proc/thread-self/schedstat, which lags by up to a scheduler tick). Node 20 has no per-thread
 * figure; with no worker running, the rest is libuv's pool and V8's helpers: an upper bound.
 */
const threadCpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/**
 * How long the event loop is held from `start()` until its promise settles: per stretch between
 * two `setImmediate` turns (the first includes `start()`'s synchronous part), the process's CPU
 * time (`cpu`: the work that held the loop, blind to being descheduled on a loaded host) and
 * the wall-clock gap (`wall`, which counts that too). Returns the longest stretch of each, in ms.
 */
async function blockOf(start: () => Promise<unknown>): Promise<{ cpu: number; wall: number }> {
  let settled = false;
  let [lastWall, lastCpu] = [performance.now(), threadCpuMs()];
  start().then(() => { settled = true; }, () => { settled = true; });
  let [wall, cpu] = [0, 0];
  do {
    await new Promise((r) => setImmediate(r));
    const [t, c] = [performance.now(), threadCpuMs()];
    wall = Math.max(wall, t - lastWall);
    cpu = Math.max(cpu, c - lastCpu);
    [lastWall, lastCpu] = [performance.now(), threadCpuMs()];
  } while (!settled);
  return { cpu, wall };
}

async function stopBlockRow(ctx: SuiteContext, n: number): Promise<BenchResult> {
  const pairs = ctx.quick ? 3 : 30;
  ctx.progress(`S1-${n}: ${pairs} pairs, stop of one exec tree with ${n} extra idle processes`);
  const registry = new TurnRegistry();
  const scratch = new Scratch();
  const stopIdle = await idleProcesses(n);
  const fullstop: number[] = [];
  const raw: number[] = [];
  const walls: number[] = [];
  try {
    const hostProcesses = readdirSync('/proc').filter((e) => /^\d+$/.test(e)).length;
    for (let i = -1; i < pairs; i++) { // one warm-up pair
      const token = registry.beginTurn('s1');
      const pidfile = scratch.pidfile();
      const running = exec('sh', ['-c', DIES_ON_TERM, 'tree', pidfile], { token, graceMs: 5000 }).catch(() => undefined);
      const pids = await pidsOf(pidfile, false);
      const f = await blockOf(() => { token.cancel(); return running; });
      await reap(pids);
      registry.endTurn('s1', token);
      const child = spawn('sh', ['-c', DIES_ON_TERM, 'tree', (pidfile + 'r')], { detached: true, stdio: 'ignore' });
      const exited = new Promise((r) => child.once('exit', r));
      const rawPids = await pidsOf(pidfile + 'r', false);
      const r = await blockOf(() => { process.kill(-child.pid!, 'SIGTERM'); return exited; });
      await reap(rawPids);
      if (i >= 0) { fullstop.push(f.cpu); raw.push(r.cpu); walls.push(f.wall); }
    }
    return compare({
      id: `S1-${n}`, metric: `event-loop block of one exec stop, ${n} extra idle processes`, unit: 'ms', better: 'lower',
      extra: { goal: '≤ 1 ms, flat in N', idleProcesses: n, hostProcesses, pairs, measure: 'CPU ms in the longest stretch between two event-loop turns', wallGapMedianMs: summarize(walls).median },
    }, fullstop, 'raw process.kill(-pgid, SIGTERM)', raw, { paired: true });
  } finally {
    await stopIdle();
    scratch.remove();
  }
}
