/**
 * What a file ledger holds in memory (docs/ledger.md, "Memory"): retention gives it back. Once
 * `removeSegments` removed every sealed segment, the session index no longer holds their lines'
 * ranges (`SessionIndex.prune`) and the ids of the turns that ended in them are forgotten. Measured
 * in a `node --expose-gc` process of its own (heapUsed + arrayBuffers after a full GC), with
 * fixtures whose figures dwarf the noise. Runs against dist/.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { openLedger, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-memory-');

const FIXTURE = fileURLToPath(new URL('./fixtures/ledger/retention-memory.mjs', import.meta.url));

async function measure(mode: 'runs' | 'turns'): Promise<{ held: number; afterRemoval: number }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', FIXTURE, mode], { timeout: 60_000 });
  return JSON.parse(stdout) as { held: number; afterRemoval: number };
}

describe('removeSegments gives the memory of what it removed back', () => {
  it('the index ranges of 200,000 lines of 1,000 sessions writing at once: less than half is left', async () => {
    const { held, afterRemoval } = await measure('runs');
    expect(held).toBeGreaterThan(1024 * 1024);
    expect(afterRemoval).toBeLessThan(held / 2);
  });

  it('the ids of 20,000 ended turns: less than half is left', async () => {
    const { held, afterRemoval } = await measure('turns');
    expect(held).toBeGreaterThan(1024 * 1024);
    expect(afterRemoval).toBeLessThan(held / 2);
  });
});

describe('turn ids after retention', () => {
  it('the id of a turn that ended in the removed segments is forgotten, as by a reopen; a turn still open keeps its own', async () => {
    const ledger = await openLedger(undefined, { segmentBytes: 200 });
    await ledger.append({ sessionId: 's', turnId: 'ended', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 'ended', type: 'status', status: 'completed' });
    await ledger.append({ sessionId: 's', turnId: 'open', type: 'turn_started' });
    for (let i = 0; i < 4; i++) await ledger.append({ sessionId: 'other', turnId: `pad${i}`, type: 'say', text: 'x'.repeat(100) });
    await ledger.flush();
    const through = ledger.segments().at(-1)!.lastSeq;
    expect(through).toBeGreaterThanOrEqual(3);
    await ledger.removeSegments(through);
    expect(ledger.hasTurn('ended')).toBe(false);
    expect(ledger.hasTurn('open')).toBe(true);
    await expect(ledger.append({ sessionId: 's', turnId: 'open', type: 'turn_started' })).rejects.toThrow(/used once/);
    await ledger.append({ sessionId: 's', turnId: 'open', type: 'status', status: 'completed' });
    await ledger.append({ sessionId: 's', turnId: 'ended', type: 'turn_started' });
    expect((await ledger.entries({ sessionId: 's' })).map((e) => [e.turnId, e.type])).toEqual([['open', 'status'], ['ended', 'turn_started']]);
  });
});
