/**
 * A disk that stops answering syncs (a hard NFS mount, a dying disk, a frozen file system) never
 * holds a stop: the file `Ledger` waits for a stop's intent at most `intentTimeoutMs`, and a flush
 * and `close()` settle within `timeoutMs`, with a `LedgerTimeoutError`, while the sync goes on.
 * Runs against dist/.
 */
import fs from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { CancelledError, Ledger, LedgerTimeoutError, TurnRunner } from '../dist/src/index.js';
import { DEFAULT_LEDGER_INTENT_TIMEOUT_MS } from '../dist/src/constants.js';
import { file, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-hung-disk-');

type SyncCallback = (error: NodeJS.ErrnoException | null) => void;

/** `fs.fdatasync` held: no sync returns until `answer()`, which runs the held ones for real. */
function hangSyncs(): { held: () => number; answer: () => void } {
  const real = fs.fdatasync.bind(fs) as (fd: number, callback: SyncCallback) => void;
  const held: [number, SyncCallback][] = [];
  const spy = vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, callback: SyncCallback) => { held.push([fd, callback]); }) as never);
  return {
    held: () => held.length,
    answer() {
      spy.mockRestore();
      for (const [fd, callback] of held.splice(0)) real(fd, callback);
    },
  };
}

describe('a disk whose syncs never return', () => {
  it('does not hold a stop: the signal goes after intentTimeoutMs, the stop ends with a LedgerTimeoutError, and close settles within timeoutMs', async () => {
    const ledger = await Ledger.open(file, { intentTimeoutMs: 100, timeoutMs: 300 });
    expect(ledger.intentTimeoutMs).toBe(100);
    const runner = new TurnRunner({ ledger, graceMs: 20 });
    let running!: () => void;
    const ran = new Promise<void>((resolve) => { running = resolve; });
    const outcome = runner.run('s', (turn) => turn.tool('stream', {}, () => {
      running();
      return new Promise((_, reject) => turn.signal.addEventListener('abort', () => reject(new CancelledError('aborted')), { once: true }));
    }), { turnId: 't1' });
    await ran;
    const disk = hangSyncs();
    try {
      const t0 = performance.now();
      const report = await runner.stop('s');
      expect((await outcome).status).toBe('cancelled');
      expect(report!.ledgerError).toBeInstanceOf(LedgerTimeoutError);
      expect(report!.signalledAt).toBeLessThan(100 + 1000); // liveness bounds: the store's, not the disk's
      expect(performance.now() - t0).toBeLessThan(100 + 300 + 2000);
      const t1 = performance.now();
      await expect(ledger.close()).rejects.toThrow(LedgerTimeoutError);
      expect(performance.now() - t1).toBeLessThan(300 + 2000);
      expect(disk.held()).toBeGreaterThan(0);
    } finally {
      disk.answer();
    }
    // The held syncs ran at last: the file holds the whole stop, and opens with nothing to repair.
    const reopened = await Ledger.open(file);
    expect(reopened.repair.closedTurns).toBe(0);
    expect((await reopened.entries()).map((e) => (e.type === 'status' ? `status:${e.status}` : e.type)))
      .toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    await reopened.close();
  });

  it('refuses a bad intentTimeoutMs or timeoutMs with the option named', async () => {
    await expect(Ledger.open(file, { intentTimeoutMs: -1 })).rejects.toThrow(/options\.intentTimeoutMs/);
    await expect(Ledger.open(file, { timeoutMs: 0 })).rejects.toThrow(RangeError);
    await expect(Ledger.open(file, { timeoutMs: '5' as never })).rejects.toThrow(/options\.timeoutMs/);
  });
});

describe('the bound of a stop\'s wait for its intent', () => {
  it('is set on every file Ledger (LedgerStore.intentTimeoutMs): 5,000 ms unless told', async () => {
    const ledger = await Ledger.open(file);
    expect(ledger.intentTimeoutMs).toBe(DEFAULT_LEDGER_INTENT_TIMEOUT_MS);
    expect(DEFAULT_LEDGER_INTENT_TIMEOUT_MS).toBe(5000);
    await ledger.close();
    const told = await Ledger.open(file, { intentTimeoutMs: 250 });
    expect(told.intentTimeoutMs).toBe(250);
    await told.close();
  });
});
