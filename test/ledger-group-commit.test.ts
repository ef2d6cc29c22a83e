/**
 * Group commit (docs/runner.md, "Ledger"): a storm of stops through a real TurnRunner on a disk
 * ledger shares its fdatasyncs, and each stop still has its `cancelling` on disk before its signal
 * and its history on disk before its `turn_aborted`.
 */
import fs, { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Ledger, TurnRegistry, TurnRunner, type LedgerEntry, type StopReport } from '../dist/src/index.js';
import { RELEASE_SLICE } from '../dist/src/ledger/release.js';
import { ledgerHooks } from '../dist/src/ledger/ledger-hooks.js';
import { spyOnFdatasync } from './support/fdatasync-spy.js';

const TURNS = 1000;
/**
 * What group commit holds a storm to (docs/ledger.md, "Group commit"): the stops' intents, queued in
 * one run, share two syncs (the first stop's, then one for all the others); their signals go out
 * RELEASE_SLICE a turn of the event loop, so their histories arrive over ceil(TURNS / RELEASE_SLICE)
 * turns, and a sync starts only when the one in flight ends: one a slice, plus the last. 35 for
 * 1,000 stops (typically 9 to 18 here), against 2,000 without group commit.
 */
const SYNC_BOUND = 2 + Math.ceil(TURNS / RELEASE_SLICE) + 1;

let dir: string;
let ledger: Ledger;
const registry = new TurnRegistry();

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fullstop-group-commit-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
});

afterEach(async () => {
  vi.restoreAllMocks();
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

interface Storm {
  /** fdatasync calls from the first stop to the last `turn_aborted`. */
  syncs: number;
  reports: (StopReport | null)[];
  /** Per turn: `ledger.durableSeq` seen by the turn's abort listener, and by its `turn_aborted` listener. */
  durableAtSignal: Map<string, number>;
  durableAtEvent: Map<string, number>;
}

/** TURNS running turns (each awaits its signal), all stopped at once; counts the syncs of the storm. */
async function stopStorm(): Promise<Storm> {
  const runner = new TurnRunner({ registry, ledger, graceMs: 5000 });
  const durableAtSignal = new Map<string, number>();
  const durableAtEvent = new Map<string, number>();
  runner.on('turn_aborted', ({ turnId }: { turnId: string }) => durableAtEvent.set(turnId, ledgerHooks(ledger)!.durableSeq));
  let running = 0;
  let allRunning!: () => void;
  const everyBodyRuns = new Promise<void>((resolve) => { allRunning = resolve; });
  const outcomes = Array.from({ length: TURNS }, (_, i) => runner.run(`s${i}`, (turn) => new Promise((_, reject) => {
    turn.signal.addEventListener('abort', () => {
      durableAtSignal.set(turn.turnId, ledgerHooks(ledger)!.durableSeq);
      reject(turn.signal.reason);
    }, { once: true });
    if (++running === TURNS) allRunning();
  })));
  await everyBodyRuns;
  await ledger.flush(); // the turns' starts are on disk: the storm's syncs are the stops' own
  let syncs = 0;
  spyOnFdatasync(() => { syncs += 1; });
  const reports = await Promise.all(Array.from({ length: TURNS }, (_, i) => runner.stop(`s${i}`)));
  const counted = syncs;
  const statuses = (await Promise.all(outcomes)).map((o) => o.status);
  expect(statuses.every((s) => s === 'cancelled')).toBe(true);
  expect(durableAtEvent.size).toBe(TURNS);
  return { syncs: counted, reports, durableAtSignal, durableAtEvent };
}

describe('group commit', () => {
  it(`${TURNS} concurrent stops through a TurnRunner share their fdatasyncs (at most ${SYNC_BOUND}, not two a stop)`, async () => {
    const { syncs, reports } = await stopStorm();
    expect(reports.every((r) => r !== null && r.ledgerError === undefined)).toBe(true);
    expect(syncs).toBeGreaterThan(0);
    expect(syncs).toBeLessThanOrEqual(SYNC_BOUND);
    // The history of every turn is on disk, in full.
    const entries = await ledger.entries();
    const cancelled = entries.filter((e) => e.type === 'status' && e.status === 'cancelled');
    expect(new Set(cancelled.map((e) => e.turnId)).size).toBe(TURNS);
  });

  it('each turn has its cancelling on disk before its signal, and its whole history before its turn_aborted', async () => {
    const { durableAtSignal, durableAtEvent } = await stopStorm();
    const byTurn = new Map<string, LedgerEntry[]>();
    for (const e of await ledger.entries()) (byTurn.get(e.turnId) ?? byTurn.set(e.turnId, []).get(e.turnId)!).push(e);
    expect(byTurn.size).toBe(TURNS);
    for (const [turnId, entries] of byTurn) {
      const intent = entries.find((e) => e.type === 'status' && e.status === 'cancelling')!;
      const last = entries.at(-1)!;
      expect([last.type, (last as { status?: string }).status]).toEqual(['status', 'cancelled']);
      expect(entries.some((e) => e.type === 'turn_aborted')).toBe(true);
      // durableSeq is the highest seq an fdatasync covered: covering a seq covers every line before it.
      expect(durableAtSignal.get(turnId)!, `${turnId}: cancelling (seq ${intent.seq}) durable before the signal`).toBeGreaterThanOrEqual(intent.seq);
      expect(durableAtEvent.get(turnId)!, `${turnId}: history (to seq ${last.seq}) durable before turn_aborted`).toBeGreaterThanOrEqual(last.seq);
    }
  });

  it('a flush that arrives while a sync runs waits for the next one, which covers its append', async () => {
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let inFirst!: () => void;
    const firstStarted = new Promise<void>((resolve) => { inFirst = resolve; });
    // Counted as the call is made (the shared spy's hook runs a microtask later): a sync started
    // for the late append would be counted before that append's own promise goes on.
    let calls = 0;
    const realSync = fs.fdatasync;
    vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => {
      if (++calls === 1) {
        inFirst();
        void gate.then(() => realSync(fd, callback));
      } else {
        realSync(fd, callback);
      }
    }) as never);
    const first = ledger.flush();
    await firstStarted;
    const seqOfLate = ledgerHooks(ledger)!.seq + 1;
    const lateWritten = ledger.append({ sessionId: 's', turnId: 't', type: 'say', text: 'late' });
    let lateDone = false;
    const late = Promise.all([ledger.flush(), ledger.flush(), ledger.flush()]).then(() => { lateDone = true; });
    await lateWritten; // the late line is written: a sync of its own could start now, and would have
    expect(calls).toBe(1); // at most one sync in flight: the late flushes wait, they start none
    release();
    await first;
    expect(ledgerHooks(ledger)!.durableSeq).toBe(seqOfLate - 1); // the first sync did not cover the late append…
    expect(lateDone).toBe(false); // …so the late flushes are still waiting
    await late;
    expect(calls).toBe(2); // three late flushes, one sync
    expect(ledgerHooks(ledger)!.durableSeq).toBe(seqOfLate);
    expect(ledgerHooks(ledger)!.syncs).toBeGreaterThanOrEqual(2);
  });
});
