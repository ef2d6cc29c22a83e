/**
 * R1–R7 (issue #5): the stop of a turn whose tools all stop cooperatively, request →
 * `turn_aborted` emitted, split into the phases of the `StopReport`.
 *
 * The turn (one per sample, a fresh turn id each time): a `TurnRunner` with a real `Ledger` in a
 * temp dir and a 1-thread `TurnPool`. Its body runs, side by side,
 * - `compute`: a pool task blocked in `sleep()` from `fullstop/worker` (bench/workers/runner-tasks.ts),
 * - `llm`: a main-thread tool awaiting `turn.signal` (what a fetch / an LLM stream does),
 * - a `turn.say` stream: a chunk every STREAM_EVERY_MS until the signal aborts it.
 * Once the task is blocked and a few chunks are written, `runner.stop(session)`; the figure is
 * `performance.now()` in a `turn_aborted` listener minus `performance.now()` just before `stop`.
 * Each sample's `StopReport` gives the phases (ms from the request): intent+signal = `signalledAt`,
 * settle = `settledAt − signalledAt`, hard stop = `hardStopAt − settledAt`, history =
 * `markerAt − hardStopAt`, flush = `flushedAt − markerAt`, emit = `emittedAt − flushedAt`.
 *
 * Raw sides, no library, sampled in the same rounds (the order of the three sides rotates every
 * round). Both write, untimed first, the bytes the fullstop turn had written before its stop (they
 * are unsynced there too, and the first fdatasync pays for them), then time:
 * - floor (R1's baseline, what the stop must at least do): `AbortController.abort()` (one
 *   listener), `Atomics.store`+`notify` to a plain worker blocked in `Atomics.wait`, its message
 *   back, then one append of every byte the stop wrote + `fdatasync`.
 * - ordered (the phase peers): the same work in the contract's order — append the intent line +
 *   fdatasync, abort + notify [signal peer]; the worker's message back [settle peer]; append the
 *   history lines [history peer]; fdatasync [flush peer]. Its total is in R1's `extra`
 *   (`orderedFloorMedianMs`): the contract needs two fdatasyncs, the floor only one.
 * The bytes are the previous fullstop sample's own lines, split at its `cancelling` entry. A raw
 * sample whose worker was descheduled between its "ready" and its `Atomics.wait` long enough for
 * the notify to come first woke from nothing: it is void and retaken (`voidedRaw` in R1's extra).
 * Every stop must settle cooperatively (no hard stop, `settledCooperatively`), or the suite fails.
 */

import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { CancelledError, Ledger, TurnPool, TurnRegistry, TurnRunner, type StopReport } from '../src/index.js';
import { compare, flagCells, ready, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';
import { GO, READY, type RawWake } from './workers/runner-protocol.js';

const TASKS = new URL('./workers/runner-tasks.js', import.meta.url).href;
const RAW_WORKER = new URL('./workers/runner-raw.js', import.meta.url);
const SESSION = 'bench-runner';
/** Grace of every stop: far above any cooperative settle, so a sample never times out into a hard stop. */
const GRACE_MS = 1000;
/** Main's pause between "the task is blocked" and the stop (it is really asleep, not on its way). */
const SETTLE_MS = 1;
/**
 * The say stream's cadence (an LLM's token batches). The stop comes SETTLE_MS after a chunk, so no
 * chunk is in flight when it starts: with a cadence near SETTLE_MS the next chunk's write would
 * collide with the intent's every time, and the intent phase would measure two writes.
 */
const STREAM_EVERY_MS = 10;
/** Chunks the say stream writes before the stop. */
const CHUNKS_BEFORE_STOP = 2;
const CHUNK = 'Reading src/turn/runner.ts to see where the stop spends its time; next, the ledger… ';

const PHASES = ['signal', 'settle', 'hardStop', 'history', 'flush', 'emit'] as const;
type Phase = (typeof PHASES)[number];

export const suite: Suite = {
  name: 'runner',
  ids: ['R1', 'R2', 'R3', 'R4', 'R5', 'R6', 'R7'],
  run,
};

function phasesOf(r: StopReport): Record<Phase, number> {
  return {
    signal: r.signalledAt,
    settle: r.settledAt - r.signalledAt,
    hardStop: r.hardStopAt - r.settledAt,
    history: r.markerAt - r.hardStopAt,
    flush: r.flushedAt - r.markerAt,
    emit: r.emittedAt - r.flushedAt,
  };
}

/** What a stop wrote, split at its `cancelling` entry; `pre` is what the turn wrote before it. */
interface TurnBytes {
  pre: Buffer;
  intent: Buffer;
  history: Buffer;
}

interface StopSample {
  totalMs: number;
  phasesMs: Record<Phase, number>;
  /** The listener's stamp minus the report's `emittedAt` (the emit call itself, after the stamp). */
  listenerAfterEmittedAtMs: number;
  /** When a listener the body put on `turn.signal` ran (ms from the request): intent durable + slot tripped. */
  abortSeenMs: number;
  /** When the pool task's `run()` rejected on main, ms after `signalledAt` (the task's share of the settle). */
  poolRejectedAfterSignalMs: number;
  bytes: TurnBytes;
}

interface OrderedSample {
  totalMs: number;
  signalMs: number;
  settleMs: number;
  historyMs: number;
  flushMs: number;
}


function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const onAbort = () => reject(new CancelledError('llm stream aborted', { reason: signal.reason }));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

class Lab {
  readonly dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-runner-'));
  readonly ledgerPath = join(this.dir, 'history.jsonl');
  readonly registry = new TurnRegistry();
  readonly pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  readonly taskFlags = flagCells();
  readonly rawFlags = flagCells();
  readonly raw = new Worker(RAW_WORKER, { workerData: { flags: this.rawFlags } });
  ledger!: Ledger;
  runner!: TurnRunner;
  rawFile!: FileHandle;
  #ledgerEnd = 0;
  #turns = 0;

  async start(): Promise<void> {
    await once(this.raw, 'online');
    this.ledger = await Ledger.open(this.ledgerPath);
    this.rawFile = await open(join(this.dir, 'raw.jsonl'), 'a');
    this.runner = new TurnRunner({ registry: this.registry, pool: this.pool, ledger: this.ledger, graceMs: GRACE_MS });
  }

  /** One cooperative turn, stopped once its task sleeps and its stream has spoken. */
  async stopSample(): Promise<StopSample> {
    const { runner, pool, taskFlags: flags } = this;
    const turnId = `turn-${++this.#turns}`;
    Atomics.store(flags, READY, 0);
    let chunks = 0;
    let spoken!: () => void;
    const streamed = new Promise<void>((r) => { spoken = r; });
    const marks = { abort: Number.NaN, poolRejected: Number.NaN };
    const outcome$ = runner.run(SESSION, async (turn) => {
      turn.signal.addEventListener('abort', () => { marks.abort = performance.now(); }, { once: true });
      const compute = turn.tool('compute', { n: 1_000_000 }, (token) => pool.run({ flags }, { token, name: 'sleepsUntilStopped' })
        .catch((error: unknown) => { marks.poolRejected = performance.now(); throw error; }));
      const llm = turn.tool('llm', { model: 'bench', stream: true }, () => untilAborted(turn.signal));
      const stream = (async () => {
        try {
          for (;;) {
            await turn.say(`${CHUNK}${chunks}`);
            if (++chunks === CHUNKS_BEFORE_STOP) spoken();
            await delay(STREAM_EVERY_MS, undefined, { signal: turn.signal });
          }
        } catch (error) {
          if (!turn.signal.aborted) throw error;
        }
      })();
      await Promise.all([compute, llm, stream]);
    }, { turnId });
    await ready(flags, outcome$, `${turnId} compute`);
    await Promise.race([streamed, outcome$.then((o) => { throw new Error(`${turnId}: ended ${o.status} before the stop`, { cause: o.error }); })]);
    await delay(SETTLE_MS);

    let heardAt = Number.NaN;
    runner.once('turn_aborted', () => { heardAt = performance.now(); });
    const t0 = performance.now();
    const report = await runner.stop(SESSION);
    const outcome = await outcome$;

    if (report === null || outcome.status !== 'cancelled' || !report.settledCooperatively ||
      report.hardStopped.workers + report.hardStopped.processGroups + report.hardStopped.questions !== 0) {
      throw new Error(`${turnId}: expected a cooperative stop, got ${outcome.status} and ${JSON.stringify(report)}`);
    }
    if (!Number.isFinite(heardAt) || !Number.isFinite(marks.abort) || !Number.isFinite(marks.poolRejected)) {
      throw new Error(`${turnId}: missing stamps (turn_aborted ${heardAt}, abort ${marks.abort}, pool rejected ${marks.poolRejected})`);
    }
    return {
      totalMs: heardAt - t0,
      phasesMs: phasesOf(report),
      listenerAfterEmittedAtMs: heardAt - t0 - report.emittedAt,
      abortSeenMs: marks.abort - t0,
      poolRejectedAfterSignalMs: marks.poolRejected - t0 - report.signalledAt,
      bytes: this.#bytesOfLastTurn(turnId),
    };
  }

  /** The lines the last turn wrote, split at its `cancelling` entry (and checked for the marker). */
  #bytesOfLastTurn(turnId: string): TurnBytes {
    const file = readFileSync(this.ledgerPath);
    const mine = file.subarray(this.#ledgerEnd);
    this.#ledgerEnd = file.length;
    const lines = mine.toString('utf8').split('\n').filter((l) => l.length > 0).map((l) => `${l}\n`);
    const entries = lines.map((l) => JSON.parse(l) as { turnId: string; type: string; status?: string });
    const at = entries.findIndex((e) => e.type === 'status' && e.status === 'cancelling');
    if (at < 0 || entries.some((e) => e.turnId !== turnId) || !entries.slice(at).some((e) => e.type === 'turn_aborted') ||
      entries.filter((e) => e.type === 'tool_aborted').length !== 2) {
      throw new Error(`${turnId}: unexpected history ${JSON.stringify(entries.map((e) => e.status ?? e.type))}`);
    }
    const join = (ls: string[]) => Buffer.from(ls.join(''), 'utf8');
    return { pre: join(lines.slice(0, at)), intent: join(lines.slice(at, at + 1)), history: join(lines.slice(at + 1)) };
  }

  /** Arm the raw worker: it is blocked in `Atomics.wait` when this resolves; `woke` is its wake message. */
  async #armRaw(): Promise<{ woke: Promise<RawWake> }> {
    Atomics.store(this.rawFlags, READY, 0);
    Atomics.store(this.rawFlags, GO, 0);
    const woke = (once(this.raw, 'message') as Promise<[RawWake]>).then(([m]) => m);
    this.raw.postMessage('wait');
    await ready(this.rawFlags, woke, 'raw worker');
    await delay(SETTLE_MS);
    return { woke }; // wrapped: an async function returning `woke` itself would wait for it
  }

  /** A bare AbortController with one listener (the main-thread await the stop unwinds). */
  #controller(): { controller: AbortController; unwound: Promise<void> } {
    const controller = new AbortController();
    const unwound = new Promise<void>((r) => controller.signal.addEventListener('abort', () => r(), { once: true }));
    return { controller, unwound };
  }

  #wake(): void {
    Atomics.store(this.rawFlags, GO, 1);
    Atomics.notify(this.rawFlags, GO);
  }

  /**
   * R1's baseline: abort + notify → wake message back, then one append of the stop's bytes +
   * fdatasync. `undefined` (void, retaken) when the worker was descheduled between its "ready" and
   * its `Atomics.wait` long enough for the notify to come first: then nothing woke from a block.
   */
  async floorSample(bytes: TurnBytes): Promise<number | undefined> {
    await writeAll(this.rawFile, bytes.pre);
    const { woke } = await this.#armRaw();
    const { controller, unwound } = this.#controller();
    const stopBytes = Buffer.concat([bytes.intent, bytes.history]);
    const t0 = performance.now();
    controller.abort();
    this.#wake();
    await unwound;
    const { ok } = await woke;
    await writeAll(this.rawFile, stopBytes);
    await this.rawFile.datasync();
    return ok ? performance.now() - t0 : undefined;
  }

  /** The phase peers: the same raw work in the contract's order, each step timed; void as `floorSample`. */
  async orderedSample(bytes: TurnBytes): Promise<OrderedSample | undefined> {
    await writeAll(this.rawFile, bytes.pre);
    const { woke } = await this.#armRaw();
    const { controller, unwound } = this.#controller();
    const t0 = performance.now();
    await writeAll(this.rawFile, bytes.intent);
    await this.rawFile.datasync();
    controller.abort();
    this.#wake();
    const t1 = performance.now();
    await unwound;
    const { ok } = await woke;
    const t2 = performance.now();
    await writeAll(this.rawFile, bytes.history);
    const t3 = performance.now();
    await this.rawFile.datasync();
    const t4 = performance.now();
    return ok ? { totalMs: t4 - t0, signalMs: t1 - t0, settleMs: t2 - t1, historyMs: t3 - t2, flushMs: t4 - t3 } : undefined;
  }

  async close(): Promise<void> {
    const errors: unknown[] = [];
    const step = async (fn: () => unknown) => { try { await fn(); } catch (e) { errors.push(e); } };
    await step(() => this.pool.destroy());
    await step(() => this.raw.terminate());
    await step(() => this.ledger?.close());
    await step(() => this.rawFile?.close());
    await step(() => rmSync(this.dir, { recursive: true, force: true }));
    const stats = this.registry.stats();
    if (stats.liveTokens !== 0 || stats.liveSlots !== 0 || stats.liveBridges !== 0) {
      errors.push(new Error(`runner bench: the registry is not empty at the end: ${JSON.stringify(stats)}`));
    }
    let left = true;
    try { statSync(this.dir); } catch { left = false; }
    if (left) errors.push(new Error(`runner bench: ${this.dir} was not removed`));
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, 'runner bench: clean-up failed');
  }
}

async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset, null);
    offset += bytesWritten;
  }
}

/** Retake a raw sample while it is void; at most `tries` times, counting the voids. */
async function retake<T>(sample: () => Promise<T | undefined>, voided: { count: number }, tries = 5): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await sample();
    if (value !== undefined) return value;
    voided.count++;
  }
  throw new Error(`runner bench: ${tries} void raw samples in a row (the raw worker never blocked before its wake)`);
}

const median = (xs: readonly number[]) => summarize(xs).median;
const round3 = (x: number) => Math.round(x * 1000) / 1000;

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  const rounds = ctx.quick ? 50 : 500;
  const warmup = ctx.quick ? 3 : 10;
  const lab = new Lab();
  try {
    await lab.start();
    const stops: StopSample[] = [];
    const floors: number[] = [];
    const ordered: OrderedSample[] = [];
    let bytes: TurnBytes | undefined;
    const voided = { count: 0 };
    for (let i = 0; i < warmup; i++) {
      bytes = (await lab.stopSample()).bytes;
      await retake(() => lab.floorSample(bytes!), voided);
      await retake(() => lab.orderedSample(bytes!), voided);
    }
    voided.count = 0;
    const sides: (() => Promise<void>)[] = [
      async () => { const s = await lab.stopSample(); stops.push(s); bytes = s.bytes; },
      async () => { floors.push(await retake(() => lab.floorSample(bytes!), voided)); },
      async () => { ordered.push(await retake(() => lab.orderedSample(bytes!), voided)); },
    ];
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < sides.length; k++) await sides[(k + round) % sides.length]!();
    }
    ctx.progress(`runner: R1–R7 ${rounds} rounds (stop, floor, ordered floor) after ${warmup} warm-up rounds`);
    const poolStats = lab.pool.stats();
    if (poolStats.hardStops !== 0) throw new Error(`runner bench: ${poolStats.hardStops} hard stops (every stop should be cooperative)`);
    if (voided.count > rounds / 10) throw new Error(`runner bench: ${voided.count} void raw samples in ${rounds} rounds`);
    return rows(stops, floors, ordered, rounds, poolStats.cooperativeStops, voided.count);
  } finally {
    await lab.close();
  }
}

function rows(
  stops: StopSample[], floors: number[], ordered: OrderedSample[], rounds: number, cooperativeStops: number, voidedRaw: number,
): BenchResult[] {
  const phase = (p: Phase) => stops.map((s) => s.phasesMs[p]);
  const us = (xs: readonly number[]) => xs.map((x) => x * 1000);
  const phaseMedianUs = Object.fromEntries(PHASES.map((p) => [p, round3(median(phase(p)) * 1000)]));
  // Per sample, the share of the two fdatasync-bound phases in the total (median over samples).
  const syncShare = median(stops.map((s) => (s.phasesMs.signal + s.phasesMs.flush) / s.totalMs));
  const last = stops.at(-1)!.bytes;
  const floorName = 'raw floor: abort + notify→wake + 1 append+fdatasync';
  const vsFloor = '(no raw peer: vs R1\'s raw floor, in µs)';
  return [
    compare({
      id: 'R1', metric: 'cooperative turn: stop request → turn_aborted emitted', unit: 'ms', better: 'lower',
      extra: {
        phaseMedianUs,
        sumOfPhaseMediansMs: round3(Object.values(phaseMedianUs).reduce((a, b) => a + b, 0) / 1000),
        intentPlusFlushShareOfTotal: round3(syncShare),
        orderedFloorMedianMs: round3(median(ordered.map((o) => o.totalMs))),
        emitCallAfterEmittedAtUs: round3(median(stops.map((s) => s.listenerAfterEmittedAtMs)) * 1000),
        stopBytes: { intent: last.intent.length, history: last.history.length, preStop: last.pre.length },
        rounds, cooperativeStops, voidedRaw, graceMs: GRACE_MS,
      },
    }, stops.map((s) => s.totalMs), floorName, floors),
    compare({
      id: 'R2', metric: 'phase intent+signal (signalledAt): cancelling append+fdatasync, token trip', unit: 'µs', better: 'lower',
      extra: { bodyAbortListenerRanAtUs: round3(median(stops.map((s) => s.abortSeenMs)) * 1000) },
    },
      us(phase('signal')), 'raw append+fdatasync of the intent line, abort + notify', us(ordered.map((o) => o.signalMs))),
    compare({
      id: 'R3', metric: 'phase settle: sleep() task + signal-awaiting tool settled', unit: 'µs', better: 'lower',
      extra: { poolRunRejectedAfterSignalUs: round3(median(stops.map((s) => s.poolRejectedAfterSignalMs)) * 1000) },
    },
      us(phase('settle')), 'raw notify → Atomics.wait worker\'s message back', us(ordered.map((o) => o.settleMs))),
    compare({ id: 'R4', metric: `phase hard stop (nothing left) ${vsFloor}`, unit: 'µs', better: 'lower' },
      us(phase('hardStop')), floorName, us(floors)),
    compare({ id: 'R5', metric: 'phase history: 2 tool_aborted + marker + cancelled appended', unit: 'µs', better: 'lower' },
      us(phase('history')), 'raw append of the same bytes (no sync)', us(ordered.map((o) => o.historyMs))),
    compare({ id: 'R6', metric: 'phase flush: ledger fdatasync after the history', unit: 'µs', better: 'lower' },
      us(phase('flush')), 'raw fdatasync after the same bytes', us(ordered.map((o) => o.flushMs))),
    compare({ id: 'R7', metric: `phase emit (flushedAt → emittedAt) ${vsFloor}`, unit: 'µs', better: 'lower' },
      us(phase('emit')), floorName, us(floors)),
  ];
}
