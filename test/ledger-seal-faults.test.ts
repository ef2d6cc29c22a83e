/**
 * A change of a ledger's files that fails — the sealing of a segment (rename, then the next file
 * opened), or a removal of segments — breaks the ledger or rejects its caller, and nothing else:
 * no unhandled rejection (which ends a Node process), no file descriptor left open; `entries` reads
 * what was written, and so does the next open. Runs against dist/.
 */
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { Ledger } from '../dist/src/index.js';
import { fileHandlePrototype } from './support/file-handle.js';
import { file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-seal-faults-');

const openDescriptors = () => readdirSync('/proc/self/fd').length;

/** Collects the unhandled rejections of this process until `stop()`, which resolves with them once the ones already queued have been reported. */
function watchUnhandled(): { stop(): Promise<unknown[]> } {
  const seen: unknown[] = [];
  const on = (reason: unknown) => { seen.push(reason); };
  process.on('unhandledRejection', on);
  return {
    async stop() {
      // Unhandled rejections are reported once the microtask queue drains: a macrotask later they are in.
      await new Promise((resolve) => setImmediate(resolve));
      process.off('unhandledRejection', on);
      return seen;
    },
  };
}

function eio(): NodeJS.ErrnoException {
  return Object.assign(new Error('EIO: i/o error (injected)'), { code: 'EIO' });
}

describe('a sealing that fails after the rename', () => {
  it('breaks the ledger with the cause named, raises no unhandled rejection, leaks no fd, and the next open reads every entry', async () => {
    const unhandled = watchUnhandled();
    const fds = openDescriptors();
    const ledger = await openLedger(file, { segmentBytes: 200 });
    const proto = await fileHandlePrototype();
    // The first stat after open is the sealing's, of the next file it just opened.
    vi.spyOn(proto, 'stat').mockRejectedValueOnce(eio());
    const appends = Array.from({ length: 6 }, (_, i) =>
      ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'say', text: 'x'.repeat(60) }).then(() => 'written', (e: Error) => e.message));
    const results = await Promise.all(appends);
    expect(results.slice(0, 2)).toEqual(['written', 'written']);
    for (const result of results.slice(2)) expect(result).toMatch(/sealing a segment of ".*history\.jsonl" and opening the next failed \(.*EIO/);
    vi.restoreAllMocks();
    // What was written is read as after any failure: the two lines, now in the sealed segment.
    expect((await ledger.entries()).map((e) => e.seq)).toEqual([1, 2]);
    await expect(ledger.close()).rejects.toThrow(/EIO/);
    expect((await ledger.entries()).map((e) => e.seq)).toEqual([1, 2]);
    expect(await unhandled.stop()).toEqual([]);
    expect(openDescriptors()).toBe(fds);
    const reopened = await Ledger.open(file);
    expect((await reopened.entries()).filter((e) => e.type === 'say').map((e) => e.seq)).toEqual([1, 2]);
    await reopened.close();
  });
});

describe('a removal of segments that fails', () => {
  it('rejects removeSegments naming the cause, raises no unhandled rejection, and the ledger goes on', async () => {
    const unhandled = watchUnhandled();
    const ledger = await openLedger(file, { segmentBytes: 200 });
    for (let i = 0; i < 6; i++) void ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'say', text: 'x'.repeat(60) });
    await ledger.flush();
    const oldest = ledger.segments()[0]!;
    // A directory where the segment was: unlink refuses it (EISDIR).
    rmSync(oldest.path);
    mkdirSync(oldest.path);
    await expect(ledger.removeSegments(oldest.lastSeq)).rejects.toThrow(/EISDIR|EPERM/);
    await ledger.append({ sessionId: 's', turnId: 'after', type: 'say', text: 'still' });
    expect(await unhandled.stop()).toEqual([]);
    rmSync(oldest.path, { recursive: true });
  });
});

describe('a removal of segments that fails part-way', () => {
  it('lists what it removed no more and what it could not remove still, and entries reads on from there', async () => {
    const ledger = await openLedger(file, { segmentBytes: 200 });
    for (let i = 0; i < 9; i++) void ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'say', text: 'x'.repeat(60) });
    await ledger.flush();
    const before = ledger.segments();
    const [first, second] = before as [typeof before[0], typeof before[0]];
    rmSync(second.path);
    mkdirSync(second.path);
    await expect(ledger.removeSegments(second.lastSeq)).rejects.toThrow(/EISDIR|EPERM/);
    expect(existsSync(first.path)).toBe(false);
    expect(ledger.segments()).toEqual(before.slice(1));
    rmSync(second.path, { recursive: true });
    expect((await ledger.removeSegments(second.lastSeq)).map((s) => s.path)).toEqual([second.path]);
    expect((await ledger.entries({ sessionId: 's' }))[0]!.seq).toBe(second.lastSeq + 1);
  });
});
