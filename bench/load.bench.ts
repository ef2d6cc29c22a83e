// L1–L3: stops under load (docs/benchmarks.md, "The load rows (L1–L3)"). L1: a storm of 1,000 running turns stopped at once, with a
// disk ledger against the same storm with none; L3: the event loop's longest delay during that storm; L2: one session's
// stop while 200 other sessions keep a 2-thread pool saturated and stream `say`, against the same stop on an idle server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Ledger, TurnPool, TurnRegistry, TurnRunner, type StopReport, type TurnOutcome } from '../src/index.js';
import { ledgerHooks } from '../src/ledger/ledger-hooks.js';
import { TASKS } from './handshake.js';
import { assertNothingLive, compare, median, samplePairs, suiteOf, summarize } from './harness.js';
import { countdown, waitingTurn } from './turns.js';

const STORM = 1000;
const LOAD_SESSIONS = 200;
const SAY_EVERY = 8; // a background turn says something after every 8th tool call
const GRACE_MS = 5000; // far above any cooperative settle: no sample times out into a hard stop

type StormSample = { ms: number; syncs: number; loopDelayMaxMs: number; cpuBlockMaxMs: number };

const processCpuMs = () => (({ user, system }) => (user + system) / 1000)(process.cpuUsage());

/**
 * The longest stretch between two turns of the event loop until `stop()`, as S1 measures it: min(wall gap, process CPU
 * in it), so a stretch the machine spent on other processes (2 cores shared) is not counted as ours.
 */
function blockProbe(): { stop: () => number } {
  let [going, block] = [true, 0];
  let [lastWall, lastCpu] = [performance.now(), processCpuMs()];
  const probe = () => {
    const [t, c] = [performance.now(), processCpuMs()];
    block = Math.max(block, Math.min(t - lastWall, c - lastCpu));
    [lastWall, lastCpu] = [t, c];
    if (going) setImmediate(probe);
  };
  setImmediate(probe);
  return { stop: () => { going = false; probe(); return block; } };
}

/** STORM running turns stopped at once: ms from the first stop() to the last `turn_aborted`, and the loop's worst delay meanwhile. */
async function storm(runner: TurnRunner, ledger: Ledger | undefined, tag: string): Promise<StormSample> {
  const sessions = Array.from({ length: STORM }, (_, i) => `${tag}-${i}`);
  const running = countdown(STORM);
  const outcomes: Promise<TurnOutcome<unknown>>[] = sessions.map((s) => runner.run(s, waitingTurn('stream', running.tick)));
  await running.done;
  await ledger?.flush(); // the turns' starts on disk first: the storm's syncs are the stops' own
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  // The writes of the start settle, and the monitor takes its first sample (it records none before it).
  await delay(5);
  loop.reset(); // which forgets the last sample's time too: the next tick only takes it again
  await delay(2);
  const aborted = countdown(STORM);
  const onAborted = () => aborted.tick();
  runner.on('turn_aborted', onAborted);
  const syncs = (ledger === undefined ? 0 : ledgerHooks(ledger)!.syncs);
  const blocks = blockProbe();
  const t0 = performance.now();
  for (const s of sessions) void runner.stop(s);
  await aborted.done;
  const ms = performance.now() - t0;
  const cpuBlockMaxMs = blocks.stop();
  // A storm that never yields to the loop records no delay until the loop turns: let its timer fire once more.
  await delay(2);
  loop.disable();
  runner.off('turn_aborted', onAborted);
  const statuses = new Set((await Promise.all(outcomes)).map((o) => o.status));
  if (statuses.size !== 1 || !statuses.has('cancelled')) throw new Error(`L1: a storm ended ${[...statuses].join(', ')}`);
  return { ms, syncs: ((ledger === undefined ? 0 : ledgerHooks(ledger)!.syncs)) - syncs, loopDelayMaxMs: loop.max / 1e6, cpuBlockMaxMs };
}

/** A stop's phases (ms) from its StopReport. */
const phasesOf = (r: StopReport) => ({ intentSignal: r.signalledAt, settle: r.settledAt - r.signalledAt, hardStop: r.hardStopAt - r.settledAt,
  history: r.markerAt - r.hardStopAt, flush: r.flushedAt - r.markerAt, emit: r.emittedAt - r.flushedAt });
type Phases = ReturnType<typeof phasesOf>;

/** One stop of a waiting turn in session `measured`: request → its `turn_aborted`, ms, and its phases. */
async function oneStop(runner: TurnRunner, phases: Phases[] = []): Promise<number> {
  const running = countdown(1);
  const outcome = runner.run('measured', waitingTurn('stream', running.tick));
  await running.done;
  await delay(1);
  let heardAt = Number.NaN;
  const onAborted = ({ sessionId }: { sessionId: string }) => { if (sessionId === 'measured') heardAt = performance.now(); };
  runner.on('turn_aborted', onAborted);
  const t0 = performance.now();
  const report = await runner.stop('measured');
  runner.off('turn_aborted', onAborted);
  const { status } = await outcome;
  if (report === null || status !== 'cancelled' || !report.settledCooperatively) throw new Error(`L2: the measured stop ended ${status}`);
  phases.push(phasesOf(report));
  return heardAt - t0;
}

/** LOAD_SESSIONS turns looping trivial pool tasks (each a tool call: two ledger lines) and saying something every few. */
function startLoad(runner: TurnRunner, pool: TurnPool): { stop: () => Promise<{ toolCalls: number; says: number }> } {
  let [toolCalls, says] = [0, 0];
  const outcomes = Array.from({ length: LOAD_SESSIONS }, (_, i) => runner.run(`load-${i}`, async (turn) => {
    for (let k = 0; !turn.signal.aborted; k++) {
      await turn.tool('work', { k }, (token) => pool.run(k, { token, name: 'trivial' }));
      toolCalls++;
      if (k % SAY_EVERY === SAY_EVERY - 1) {
        await turn.say(`session ${i}: step ${k} done; next, the following one…`);
        says++;
      }
    }
  }));
  return {
    async stop() {
      await Promise.all(Array.from({ length: LOAD_SESSIONS }, (_, i) => runner.stop(`load-${i}`)));
      const statuses = new Set((await Promise.all(outcomes)).map((o) => o.status));
      if ([...statuses].some((s) => s !== 'cancelled')) throw new Error(`L2: a load turn ended ${[...statuses].join(', ')}`);
      return { toolCalls, says };
    },
  };
}

/** A temporary directory with a ledger in it, removed after `fn`. */
async function withLedger<T>(name: string, fn: (ledger: Ledger) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), `fullstop-bench-${name}-`));
  const ledger = await Ledger.open(join(dir, 'history.jsonl'));
  try {
    return await fn(ledger);
  } finally {
    await ledger.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Per phase, `p50/p99` in ms. */
const phaseSummary = (phases: Phases[]) => Object.fromEntries(Object.keys(phases[0]!).map((k) => {
  const { median: p50, p99 } = summarize(phases.map((p) => p[k as keyof Phases]));
  return [k, `${round2(p50)}/${round2(p99)}`];
}));

export const suite = suiteOf({
  async 'L1 L3'(ctx) {
    const pairs = ctx.quick ? 3 : 20;
    const registry = new TurnRegistry();
    return withLedger('storm', async (ledger) => {
      const [withDisk, without] = [new TurnRunner({ registry, ledger, graceMs: GRACE_MS }), new TurnRunner({ registry, graceMs: GRACE_MS })];
      let storms = 0;
      const { samples: s } = await samplePairs('L1', { pairs, warmup: 2 }, {
        ledger: () => storm(withDisk, ledger, `disk${++storms}`),
        none: () => storm(without, undefined, `none${++storms}`),
      }, ctx);
      assertNothingLive(registry, 'L1');
      const ms = s.ledger.map((x) => x.ms);
      const syncs = summarize(s.ledger.map((x) => x.syncs));
      return [
        compare({ id: 'L1', metric: `stop storm: ${STORM} running turns stopped at once → last turn_aborted`, unit: 'ms', extra: {
          goal: '≤ 1.2×', turns: STORM, stopsPerSecond: Math.round(STORM / (median(ms) / 1000)),
          stopsPerSecondNoLedger: Math.round(STORM / (median(s.none.map((x) => x.ms)) / 1000)),
          syncsPerStorm: { median: syncs.median, max: Math.max(...s.ledger.map((x) => x.syncs)) }, pairs, graceMs: GRACE_MS,
        } }, ms, ['the same storm, no ledger', s.none.map((x) => x.ms)]),
        compare({ id: 'L3', metric: `event-loop delay max during the L1 storm (disk ledger)`, unit: 'ms', extra: {
          goal: 'fullstop median ≤ 20 ms', measure: 'perf_hooks.monitorEventLoopDelay({ resolution: 1 }).max, one per storm', pairs,
          cpuBlockMaxMs: { ledger: round2(median(s.ledger.map((x) => x.cpuBlockMaxMs))), none: round2(median(s.none.map((x) => x.cpuBlockMaxMs))),
            measure: 'longest stretch between two event-loop turns: min(wall, process CPU), median over storms' },
        } }, s.ledger.map((x) => x.loopDelayMaxMs), ['the same storm, no ledger', s.none.map((x) => x.loopDelayMaxMs)]),
      ];
    });
  },

  async L2(ctx) {
    const stops = ctx.quick ? 10 : 60;
    const registry = new TurnRegistry();
    const pool = new TurnPool({ filename: TASKS, minThreads: 2, maxThreads: 2 });
    try {
      return await withLedger('busy', async (ledger) => {
        const runner = new TurnRunner({ registry, pool, ledger, graceMs: GRACE_MS });
        const idle: number[] = [];
        const loaded: number[] = [];
        const [idlePhases, loadedPhases]: Phases[][] = [[], []];
        const blocks = ctx.quick ? 2 : 6;
        const perBlock = Math.ceil(stops / blocks);
        ctx.progress(`L2: ${blocks} blocks of ${perBlock} idle stops then ${perBlock} under the load of ${LOAD_SESSIONS} sessions`);
        for (let i = 0; i < 5; i++) await oneStop(runner); // warm-up
        const loop = monitorEventLoopDelay({ resolution: 1 });
        let [toolCalls, says, loadSeconds] = [0, 0, 0];
        // Idle and loaded stops alternate in blocks, so the disk's and the machine's drift fall on both sides.
        for (let block = 0; block < blocks; block++) {
          for (let i = 0; i < perBlock; i++) idle.push(await oneStop(runner, idlePhases));
          const t0 = performance.now();
          const load = startLoad(runner, pool);
          await delay(200); // the pool queue fills and the loop reaches its steady state
          loop.enable();
          for (let i = 0; i < perBlock; i++) loaded.push(await oneStop(runner, loadedPhases));
          loop.disable();
          loadSeconds += (performance.now() - t0) / 1000;
          const counts = await load.stop();
          [toolCalls, says] = [toolCalls + counts.toolCalls, says + counts.says];
        }
        assertNothingLive(registry, 'L2');
        const idleP50 = summarize(idle).median;
        const loadedSummary = summarize(loaded);
        return compare({ id: 'L2', metric: `one session's stop while ${LOAD_SESSIONS} sessions saturate a 2-thread pool`, unit: 'ms', extra: {
          goal: 'loaded p99 ≤ 3× idle p50', p99OverIdleP50: round2(loadedSummary.p99 / idleP50), loadedP50: round2(loadedSummary.median),
          loadedP99: round2(loadedSummary.p99), idleP50: round2(idleP50), stops: loaded.length, idleStops: idle.length,
          blocks, loadToolCallsPerSecond: Math.round(toolCalls / loadSeconds), loadSaysPerSecond: Math.round(says / loadSeconds),
          loadedLoopDelayMs: { p50: round2(loop.percentile(50) / 1e6), p99: round2(loop.percentile(99) / 1e6), max: round2(loop.max / 1e6) },
          phaseMs: { idle: phaseSummary(idlePhases), loaded: phaseSummary(loadedPhases) },
        } }, loaded, ['the same stop, server idle', idle], { paired: false });
      });
    } finally {
      await pool.destroy();
    }
  },
});
