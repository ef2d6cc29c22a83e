/**
 * A failed ledger never cancels a stop: with the ledger closed or its disk full, the signal, the
 * grace, the hard stop and the event still happen, `run()` resolves `cancelled`, the report carries
 * `ledgerError`, and the next `Ledger.open` closes the turn.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  exec, Ledger, TurnRunner, type LedgerEntry,
} from '../dist/src/index.js';
import { spyOnFdatasync } from './support/fdatasync-spy.js';
import { flags, started } from './support/handshake.js';
import { runnerScene } from './support/runner-scene.js';
import { eventually, isGone } from './support/leaks.js';
import { mountSmallDisk, unmountSmallDisk, type SmallDisk } from './support/small-disk.js';

const scene = runnerScene('fullstop-runner-ledger-');
const { registry, pool } = scene;

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${(e as { status: string }).status}` : e.type);

/** A model stream bound to the turn's signal: resolves with how it ended. */
function streamUntilAborted(signal: AbortSignal): Promise<'aborted'> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {}, 10);
    signal.addEventListener('abort', () => { clearInterval(timer); resolve('aborted'); }, { once: true });
  });
}

/** A turn whose model stream listens to its signal and whose tool's pool task never checks; resolves once the task runs. */
async function spinningTurn(turnId: string) {
  const f = flags();
  let stream: Promise<string> | undefined;
  const aborted: unknown[] = [];
  scene.runner.on('turn_aborted', (p) => aborted.push(p));
  const outcome$ = scene.runner.run('s', async (turn) => {
    stream = streamUntilAborted(turn.signal);
    await turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' }));
  }, { turnId });
  await started(f);
  return { aborted, outcome$, stream: () => stream };
}

describe('a failed ledger never cancels the stop', () => {
  it('with the ledger closed mid-turn: signal, grace and hard stop happen, run() resolves cancelled with ledgerError, the event fires, and the next open closes the turn', async () => {
    const { aborted, outcome$, stream } = await spinningTurn('t-closed');
    const hardStopsBefore = pool.stats().hardStops;
    await scene.ledger.close();
    const report = await scene.runner.stop('s', { graceMs: 200 });
    const outcome = await outcome$;

    expect(report!.ledgerError).toBeInstanceOf(Error);
    expect(String((report!.ledgerError as Error).message)).toMatch(/closed/);
    expect(await stream()).toBe('aborted');
    expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { workers: 1, processGroups: 0, questions: 0 } });
    expect(report!.settledAt).toBeGreaterThanOrEqual(195);
    expect(pool.stats().hardStops).toBe(hardStopsBefore + 1);
    expect(outcome).toMatchObject({ status: 'cancelled', report });
    expect(aborted).toHaveLength(1);

    const reopened = await Ledger.open(scene.ledger.path);
    try {
      const entries = await reopened.entries({ turnId: 't-closed' });
      expect(entries.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
    } finally {
      await reopened.close();
    }
  });

  it("with the intent's fdatasync failing: the stop goes on, ledgerError is the sync's failure, nothing after it is written, and the next open closes the turn", async () => {
    const { aborted, outcome$, stream } = await spinningTurn('t-sync');
    const linesBefore = readFileSync(scene.ledger.path, 'utf8');
    // The stop's first sync is its intent's: a writeback error, reported once (a second sync would succeed).
    let syncs = 0;
    spyOnFdatasync(() => {
      syncs += 1;
      if (syncs === 1) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
    });
    const report = await scene.runner.stop('s', { graceMs: 200 });
    const outcome = await outcome$;

    expect(String((report!.ledgerError as Error).message)).toMatch(/syncing ".*history\.jsonl" failed.*\(EIO/);
    expect(await stream()).toBe('aborted');
    expect(report).toMatchObject({ hardStopped: { workers: 1, processGroups: 0, questions: 0 } });
    expect(outcome).toMatchObject({ status: 'cancelled', report });
    expect(aborted).toHaveLength(1);
    expect(syncs).toBe(1); // the history was refused, not written and synced as if the intent had been durable
    // Only the intent was written (before its sync failed); nothing of the history follows it.
    const added = readFileSync(scene.ledger.path, 'utf8').slice(linesBefore.length).trimEnd().split('\n').map((l) => JSON.parse(l) as LedgerEntry);
    expect(added.map(typeOf)).toEqual(['status:cancelling']);

    await scene.ledger.close().catch(() => {});
    vi.restoreAllMocks();
    const reopened = await Ledger.open(scene.ledger.path);
    try {
      const entries = await reopened.entries({ turnId: 't-sync' });
      expect(entries.map(typeOf)).toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    } finally {
      await reopened.close();
    }
  });

  it('outside a stop: a body that completes after the ledger closed keeps its outcome, with ledgerError, and its event fires', async () => {
    const completed: unknown[] = [];
    scene.runner.on('turn_completed', (p) => completed.push(p));
    let close!: () => void;
    const closedLedger = new Promise<void>((r) => { close = r; });
    const outcome$ = scene.runner.run('s', async () => { await closedLedger; return 42; }, { turnId: 't-late' });
    await new Promise<void>((r) => scene.runner.once('turn_started', () => r()));
    await scene.ledger.close();
    close();
    const outcome = await outcome$;
    expect(outcome).toMatchObject({ status: 'completed', value: 42 });
    expect(String((outcome.ledgerError as Error).message)).toMatch(/closed/);
    expect(completed).toEqual([{ sessionId: 's', turnId: 't-late', value: 42 }]);
  });

  describe('on a full disk (a 64 KiB tmpfs)', () => {
    let disk: SmallDisk;

    beforeEach(() => {
      disk = mountSmallDisk(scene.dir);
    });

    afterEach(() => {
      unmountSmallDisk(disk);
    });

    it('stops the turn (worker, process tree, model stream), reports ENOSPC as ledgerError, and Ledger.open then says the disk is full and what to free', async (ctx) => {
      if (!disk.mounted) {
        console.log(`skipped: cannot mount a tmpfs here (${disk.refused})`);
        ctx.skip();
      }
      const path = join(disk.mnt, 'history.jsonl');
      const small = await Ledger.open(path);
      const r = new TurnRunner({ registry, pool, ledger: small, graceMs: 300 });
      const f = flags();
      const pidFile = join(scene.dir, 'leader.pid');
      let stream: Promise<string> | undefined;
      let treePid = 0;
      const outcome$ = r.run('disk', async (turn) => {
        stream = streamUntilAborted(turn.signal);
        await Promise.all([
          turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' })),
          turn.tool('sh', {}, (token) => exec('sh', ['-c', `echo $$ > ${pidFile}; trap '' TERM; while :; do sleep 1; done`], { token })),
        ]);
      }, { turnId: 't-full' });
      await started(f);
      await eventually(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', 5000, 'the shell to start');
      treePid = Number(readFileSync(pidFile, 'utf8'));
      // End the ledger exactly at a page boundary (tmpfs allocates pages), so its next byte needs a new page.
      const seq = (await small.entries()).length + 1;
      const overhead = JSON.stringify({ seq, at: Date.now(), sessionId: 'disk', turnId: 't-full', type: 'say', text: '' }).length + 1;
      let pad = 4096 - (statSync(path).size % 4096);
      if (pad < overhead) pad += 4096;
      await small.append({ sessionId: 'disk', turnId: 't-full', type: 'say', text: 'x'.repeat(pad - overhead) });
      await small.flush();
      expect(statSync(path).size % 4096).toBe(0);
      // Fill the file system to the last byte.
      try { writeFileSync(join(disk.mnt, 'filler'), Buffer.alloc(128 * 1024)); } catch (e) { expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC'); }

      const report = await r.stop('disk');
      const outcome = await outcome$;
      expect((report!.ledgerError as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }).cause?.code).toBe('ENOSPC');
      expect(String((report!.ledgerError as Error).message)).toMatch(/disk is full/);
      expect(outcome).toMatchObject({ status: 'cancelled', report });
      expect(await stream).toBe('aborted');
      expect(report!.hardStopped).toMatchObject({ workers: 1, processGroups: 1 });
      expect(isGone(treePid)).toBe(true);
      await small.close().catch(() => {});

      // Full: the open turn cannot be closed, and the error says why and what to do.
      const opening = Ledger.open(path);
      await expect(opening).rejects.toThrow(/disk is full \(ENOSPC; \d+ bytes free on the file system holding/);
      await expect(opening).rejects.toThrow(/Free space there/);
      rmSync(join(disk.mnt, 'filler'));
      const reopened = await Ledger.open(path);
      try {
        const entries = await reopened.entries({ turnId: 't-full' });
        expect(entries.at(-1)).toMatchObject({ type: 'status' });
        expect(['interrupted', 'cancelled']).toContain((entries.at(-1) as { status: string }).status);
        const calls = entries.filter((e) => e.type === 'tool_call').map((e) => (e as { callId: string }).callId);
        const closed = entries.filter((e) => e.type === 'tool_output' || e.type === 'tool_aborted').map((e) => (e as { callId: string }).callId);
        expect(closed.sort()).toEqual(calls.sort());
      } finally {
        await reopened.close();
      }
    });
  });
});

