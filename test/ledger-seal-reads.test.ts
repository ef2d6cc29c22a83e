/**
 * A read never holds an append: the sealing of a segment (rename, then the next file opened) goes
 * on while an `entries()` read is under way, so the append that crosses `segmentBytes` (a stop's
 * intent, say) is written and flushed while the read is still paused; the read then returns what
 * was there when it began, through the file it began reading. Runs against dist/.
 */
import { readdirSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { fileHandlePrototype } from './support/file-handle.js';
import { file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-seal-reads-');

const openDescriptors = () => readdirSync('/proc/self/fd').length;

/**
 * Pauses the next `FileHandle.read` (an `entries()` read: the writer never reads) until `resume()`;
 * `started` resolves once a read is paused there.
 */
async function pauseNextRead(): Promise<{ started: Promise<void>; resume(): void }> {
  const proto = await fileHandlePrototype();
  const real = proto.read;
  let resume!: () => void;
  const gate = new Promise<void>((resolve) => { resume = resolve; });
  let reached!: () => void;
  const started = new Promise<void>((resolve) => { reached = resolve; });
  let paused = false;
  vi.spyOn(proto, 'read').mockImplementation(async function (this: unknown, ...args: unknown[]) {
    if (!paused) {
      paused = true;
      reached();
      await gate;
    }
    return (real as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof proto.read);
  return { started, resume };
}

/** 'flushed' once `flush` resolves, or 'still waiting' after 5 s (a liveness bound, not a timing). */
function settlesSoon(flush: Promise<void>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => { timer = setTimeout(() => resolve('still waiting'), 5000); });
  return Promise.race([flush.then(() => 'flushed'), late]).finally(() => clearTimeout(timer));
}

describe.each([
  ['entries({ sessionId }) (through the index)', { sessionId: 'reader' }],
  ['entries() (a scan of every file)', undefined],
])('a sealing while %s is paused mid-read', (_, filter) => {
  it('the append that crosses segmentBytes is written and flushed before the read resumes, and the read returns what was there', async () => {
    const fds = openDescriptors();
    const ledger = await openLedger(file, { segmentBytes: 2000 });
    for (let i = 0; i < 3; i++) await ledger.append({ sessionId: 'reader', turnId: `r${i}`, type: 'turn_started' });
    await ledger.flush();
    const before = await ledger.entries(filter);
    const read = await pauseNextRead();
    const reading = ledger.entries(filter);
    await read.started;
    // Past segmentBytes: the next line (another session's stop intent) seals the file first.
    await ledger.append({ sessionId: 'other', turnId: 'o1', type: 'say', text: 'x'.repeat(2500) });
    const intent = ledger.append({ sessionId: 'other', turnId: 'o1', type: 'status', status: 'cancelling', reason: 'user' });
    const outcome = await settlesSoon(Promise.all([intent, ledger.flush()]).then(() => {}));
    read.resume();
    const entries = await reading;
    expect(outcome).toBe('flushed');
    expect(ledger.segments().length).toBe(1);
    // What the file held when the read began, read through the file it began with (now the segment).
    expect(entries.map((e) => e.seq)).toEqual(filter === undefined ? [...before.map((e) => e.seq), 4, 5].slice(0, entries.length) : before.map((e) => e.seq));
    expect(entries.slice(0, before.length)).toEqual(before);
    // And the next read sees both files.
    expect((await ledger.entries()).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect((await ledger.entries({ sessionId: 'other' })).map((e) => e.seq)).toEqual([4, 5]);
    await ledger.append({ sessionId: 'other', turnId: 'o1', type: 'status', status: 'cancelled' });
    await ledger.close();
    expect(openDescriptors()).toBe(fds);
  });
});
