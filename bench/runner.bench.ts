// R1–R7: a cooperative turn's stop, request → `turn_aborted` emitted, and its StopReport's phases,
// against the ordered floor in the same rounds (docs/benchmarks.md, "R1 against the ordered floor").
import { mkdtempSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Ledger, TurnPool, TurnRegistry, TurnRunner, type StopReport, type Turn } from '../src/index.js';
import { fdatasyncFd } from '../src/ledger/file.js';
import { flagCells, GO, RawWorker, settle, started, TASKS } from './handshake.js';
import { assertNothingLive, compare, median, samplePairs, suiteOf } from './harness.js';
import { untilStopped } from './turns.js';

const GRACE_MS = 1000; // far above any cooperative settle, so a sample never times out into a hard stop
const STREAM_EVERY_MS = 10; // well above the settle pause, so no chunk's write collides with the intent's
const CHUNK = 'Reading src/turn/runner.ts to see where the stop spends its time; next, the ledger… ';

/** What a stop wrote, split at its `cancelling` entry; `pre`: what the turn wrote before it, each line with its entry's `at` (ms). */
type TurnBytes = Record<'intent' | 'history', Buffer> & { pre: { at: number; line: Buffer }[] };

/** A stop's phases (ms) from its StopReport, and the ordered floor's steps (the peers of some of them). */
const phasesOf = (r: StopReport) => ({ signal: r.signalledAt, settle: r.settledAt - r.signalledAt, hardStop: r.hardStopAt - r.settledAt,
  history: r.markerAt - r.hardStopAt, flush: r.flushedAt - r.markerAt, emit: r.emittedAt - r.flushedAt });
type Phase = keyof ReturnType<typeof phasesOf>;
type Floor = Record<'total' | 'signal' | 'settle' | 'history' | 'flush', number>;

/** The turn's body: a pool task blocked in `sleep()`, a tool awaiting `turn.signal`, a say stream (`spoken` after two chunks). */
function body(turn: Turn, pool: TurnPool, flags: Int32Array, spoken: () => void) {
  const compute = turn.tool('compute', { n: 1_000_000 }, (token) => pool.run({ flags }, { token, name: 'sleepsUntilStopped' }));
  const llm = turn.tool('llm', { model: 'bench', stream: true }, () => untilStopped(turn.signal));
  const stream = (async () => {
    try {
      for (let chunks = 0; ; await delay(STREAM_EVERY_MS, undefined, { signal: turn.signal })) {
        await turn.say(`${CHUNK}${chunks}`);
        if (++chunks === 2) spoken();
      }
    } catch (error) {
      if (!turn.signal.aborted) throw error;
    }
  })();
  return Promise.all([compute, llm, stream]);
}

/** Split what one stopped turn wrote at its `cancelling` entry, checking the history is what a cooperative stop writes. */
function splitAtIntent(written: string, turnId: string): TurnBytes {
  const lines = written.split('\n').filter((l) => l.length > 0).map((l) => `${l}\n`);
  const entries = lines.map((l) => JSON.parse(l) as { at: number; turnId: string; type: string; status?: string });
  const at = entries.findIndex((e) => e.type === 'status' && e.status === 'cancelling');
  if (at < 0 || entries.some((e) => e.turnId !== turnId) || !entries.slice(at).some((e) => e.type === 'turn_aborted') ||
    entries.filter((e) => e.type === 'tool_aborted').length !== 2) {
    throw new Error(`${turnId}: unexpected history ${JSON.stringify(entries.map((e) => e.status ?? e.type))}`);
  }
  const bytes = (ls: string[]) => Buffer.from(ls.join(''), 'utf8');
  const pre = lines.slice(0, at).map((l, i) => ({ at: entries[i]!.at, line: bytes([l]) }));
  return { pre, intent: bytes(lines.slice(at, at + 1)), history: bytes(lines.slice(at + 1)) };
}

// The turn's lines before its stop, each in one write (as the ledger's pump writes them) as far from the first as the
// turn wrote it. The timeline is part of the floor: an `fdatasync` after the disk sat idle for a turn costs more than one
// right after the previous sample's (docs/benchmarks.md, "R1 against the ordered floor").
async function replay(file: FileHandle, pre: TurnBytes['pre']): Promise<void> {
  const start = performance.now();
  for (const { at, line } of pre) {
    const wait = at - pre[0]!.at - (performance.now() - start);
    if (wait > 0) await delay(wait);
    wholly((await file.write(line)).bytesWritten, line);
  }
}

// The floor's timed steps use the cheapest calls there are, the ones the ledger's flush makes: the bytes by `writeSync`
// on the main thread (no trip through the thread pool), the sync through the callback `fdatasync` (no promise request).
function appendNow(file: FileHandle, bytes: Buffer): void {
  wholly(writeSync(file.fd, bytes, 0, bytes.length, null), bytes);
}

/** A short write would time less than the stop writes. */
function wholly(written: number, bytes: Buffer): void {
  if (written !== bytes.length) throw new Error(`runner bench: short write (${written} of ${bytes.length} bytes)`);
}

/** The ordered floor, each step timed; `undefined` (void) if the raw worker woke from no block. */
async function orderedFloor(file: FileHandle, raw: RawWorker, bytes: TurnBytes): Promise<Floor | undefined> {
  // The raw worker blocks before the replay, as the turn's task sleeps from the turn's start.
  const { report, acted } = await raw.sample({ kind: 'wait' }, async () => {
    await replay(file, bytes.pre);
    await settle();
    // The body's main-thread awaits (the model stream, the say stream's delay) on a bare AbortController: user code, so both sides run it.
    const controller = new AbortController();
    const unwound = Promise.allSettled([untilStopped(controller.signal), delay(STREAM_EVERY_MS, undefined, { signal: controller.signal })]);
    const t0 = performance.now();
    appendNow(file, bytes.intent);
    await fdatasyncFd(file.fd);
    controller.abort();
    Atomics.store(raw.flags, GO, 1);
    Atomics.notify(raw.flags, GO);
    return { t0, t1: performance.now(), unwound };
  });
  await acted.unwound;
  const t2 = performance.now();
  appendNow(file, bytes.history);
  const t3 = performance.now();
  await fdatasyncFd(file.fd);
  const [{ t0, t1 }, t4] = [acted, performance.now()];
  return report.ok ? { total: t4 - t0, signal: t1 - t0, settle: t2 - t1, history: t3 - t2, flush: t4 - t3 } : undefined;
}

export const suite = suiteOf({
  async 'R1 R2 R3 R4 R5 R6 R7'(ctx) {
    const rounds = ctx.quick ? 20 : 400;
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-runner-'));
    const ledgerPath = join(dir, 'history.jsonl');
    const pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
    const [flags, raw, registry] = [flagCells(), new RawWorker(), new TurnRegistry()];
    let [ledger, file]: [Ledger?, FileHandle?] = [];
    try {
      await raw.online;
      [ledger, file] = [await Ledger.open(ledgerPath), await open(join(dir, 'raw.jsonl'), 'a')];
      const runner = new TurnRunner({ registry, pool, ledger, graceMs: GRACE_MS });
      // The floor writes the bytes of the latest stop: its own round's when the stop went first, else the previous round's.
      let bytes: TurnBytes = { pre: [], intent: Buffer.from('{}\n'), history: Buffer.from('{}\n') };
      let [ledgerEnd, turns] = [0, 0];
      /** One cooperative turn, stopped once its task sleeps and its stream has spoken. */
      const stop = async () => {
        const turnId = `turn-${++turns}`;
        let spoken!: () => void;
        const streamed = new Promise<void>((r) => { spoken = r; });
        const { running: outcome$ } = await started(flags, `${turnId} compute`,
          () => runner.run('bench-runner', (turn) => body(turn, pool, flags, spoken), { turnId }));
        await Promise.race([streamed, outcome$.then((o) => { throw new Error(`${turnId}: ended ${o.status} before the stop`, { cause: 'error' in o ? o.error : undefined }); })]);
        await settle();
        let heardAt = Number.NaN;
        runner.once('turn_aborted', () => { heardAt = performance.now(); });
        const t0 = performance.now();
        const report = await runner.stop('bench-runner');
        const outcome = await outcome$;
        if (report === null || outcome.status !== 'cancelled' || !report.settledCooperatively || !Number.isFinite(heardAt) ||
          report.hardStopped.workers + report.hardStopped.processGroups + report.hardStopped.questions !== 0) {
          throw new Error(`${turnId}: expected a cooperative stop, got ${outcome.status} and ${JSON.stringify(report)}`);
        }
        const written = readFileSync(ledgerPath);
        bytes = splitAtIntent(written.subarray(ledgerEnd).toString('utf8'), turnId);
        ledgerEnd = written.length;
        return { totalMs: heardAt - t0, phases: phasesOf(report) };
      };
      const { samples: s, voided } = await samplePairs('R1', { pairs: rounds, warmup: ctx.quick ? 3 : 10 }, { stop, floor: () => orderedFloor(file!, raw, bytes) }, ctx);
      const { hardStops, cooperativeStops } = pool.stats();
      if (hardStops !== 0) throw new Error(`runner bench: ${hardStops} hard stops (every stop should be cooperative)`);
      const phase = (p: Phase) => s.stop.map((x) => x.phases[p] * 1000);
      const round3 = (x: number) => Math.round(x * 1000) / 1000;
      /** R2–R7 in µs, against the floor's peer step (or, with no raw peer, the whole floor). */
      const row = (id: string, metric: string, p: Phase, [name, k]: [string, keyof Floor] = ['no raw peer: vs the whole ordered floor', 'total']) =>
        compare({ id, metric, unit: 'µs' }, phase(p), [name, s.floor.map((o) => o[k] * 1000)]);
      return [compare({ id: 'R1', metric: 'cooperative turn: stop request → turn_aborted emitted', unit: 'ms', extra: {
          goal: '≤ 1.15×', phaseMedianUs: Object.fromEntries(Object.keys(s.stop[0]!.phases).map((p) => [p, round3(median(phase(p as Phase)))])),
          intentPlusFlushShareOfTotal: round3(median(s.stop.map((x) => (x.phases.signal + x.phases.flush) / x.totalMs))),
          stopBytes: { intent: bytes.intent.length, history: bytes.history.length, preStop: bytes.pre.reduce((n, p) => n + p.line.length, 0) },
          rounds, cooperativeStops, voidedRaw: voided, graceMs: GRACE_MS,
        } }, s.stop.map((x) => x.totalMs), ['ordered floor: intent+fdatasync, abort+notify→wake, history+fdatasync', s.floor.map((o) => o.total)]),
        row('R2', 'phase intent+signal (signalledAt)', 'signal', ['raw intent append+fdatasync, abort + notify', 'signal']),
        row('R3', 'phase settle: sleep() task + awaiting tool', 'settle', ['raw notify → the worker\'s message back', 'settle']),
        row('R4', 'phase hard stop (nothing left)', 'hardStop'),
        row('R5', 'phase history: 4 entries appended', 'history', ['raw append of the same bytes', 'history']),
        row('R6', 'phase flush: fdatasync after the history', 'flush', ['raw fdatasync after the same bytes', 'flush']),
        row('R7', 'phase emit (flushedAt → emittedAt)', 'emit')];
    } finally {
      const closed = await Promise.allSettled([pool.destroy(), raw.close(), ledger?.close(), file?.close()]);
      rmSync(dir, { recursive: true, force: true });
      for (const c of closed) if (c.status === 'rejected') throw c.reason;
      assertNothingLive(registry, 'runner bench');
    }
  },
});
