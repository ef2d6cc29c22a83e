/**
 * A long line (a big output, a long `say`) is written in slices, each an asynchronous write, so the
 * event loop turns while it is written; a stop's intent appended meanwhile follows it in the file
 * and is durable once both are (docs/ledger.md, "Group commit").
 */
import fs, { readFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { expect, it, vi } from 'vitest';
import { fileHandlePrototype } from './support/file-handle.js';
import { ledgerHooks } from '../dist/src/ledger/ledger-hooks.js';
import { file, useLedgerEachTest, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-big-');
const current = useLedgerEachTest({ closeWaitMs: 0 });

it('writes a 16 MB line in slices, the event loop turning between them, and a stop intent appended meanwhile lands after it, durable', async () => {
  const sizes: number[] = [];
  const ticksAt: number[] = [];
  let ticks = 0;
  let ticking = true;
  const ticker = () => { ticks++; if (ticking) setImmediate(ticker); };
  setImmediate(ticker);
  const proto = await fileHandlePrototype();
  const realWrite = proto.write;
  vi.spyOn(proto, 'write').mockImplementation(function (this: FileHandle, ...args: unknown[]) {
    sizes.push(args[2] as number);
    ticksAt.push(ticks);
    return (realWrite as (...a: unknown[]) => Promise<unknown>).apply(this, args);
  } as never);
  const writeSync = vi.spyOn(fs, 'writeSync');

  const text = 'é'.repeat(8 * 1024 * 1024); // 16 MB of UTF-8, 8 Mi characters
  const big = current.ledger.append({ sessionId: 'A', turnId: 'a', type: 'say', text });
  await new Promise((resolve) => setImmediate(resolve));
  void current.ledger.append({ sessionId: 'B', turnId: 'b', type: 'status', status: 'cancelling', reason: 'cancel.user' });
  await current.ledger.flush();
  await big;
  ticking = false;

  // Never the whole line at once: no single write of more than a slice (1 Mi characters, ≤ 3 MiB here) …
  expect(sizes.length).toBeGreaterThanOrEqual(8);
  expect(Math.max(...sizes)).toBeLessThanOrEqual(3 * 1024 * 1024);
  expect(writeSync.mock.calls.every((call) => (call[3] as number) <= 3 * 1024 * 1024)).toBe(true);
  // … and the loop turned while the line was being written.
  expect(ticksAt.at(-1)! - ticksAt[0]!).toBeGreaterThan(2);
  // The file holds A's line whole, then B's intent, both durable.
  const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  expect(lines.map((e) => [e.seq, e.sessionId, e.type])).toEqual([[1, 'A', 'say'], [2, 'B', 'status']]);
  expect(lines[0].text).toBe(text);
  expect(ledgerHooks(current.ledger)!.durableSeq).toBe(2);
});

it("a stop's flush waits only for the lines queued before it, not for a steady stream of other sessions' long lines", async () => {
  const long = 'x'.repeat(1536 * 1024); // longer than a slice: always written by the background writer
  let written = 0;
  let issued = 0;
  let stopFlushed = false;
  let writtenAtFlush = -1;
  // Session A appends a long line every turn of the event loop (so new ones queue while each is
  // being written, a slice at a time) until the stop's flush resolves, or 60 lines.
  const appendsOfA: Promise<void>[] = [];
  const streamA = () => {
    if (stopFlushed || issued >= 60) return;
    issued++;
    appendsOfA.push(current.ledger.append({ sessionId: 'A', turnId: 'a', type: 'say', text: long }).then(() => { written++; }));
    setImmediate(streamA);
  };
  streamA();
  await new Promise((resolve) => setImmediate(resolve));
  const queuedBefore = ledgerHooks(current.ledger)!.seq;
  void current.ledger.append({ sessionId: 'B', turnId: 'b', type: 'status', status: 'cancelling', reason: 'cancel.user' });
  await current.ledger.flush();
  stopFlushed = true;
  writtenAtFlush = written;
  await Promise.all(appendsOfA);
  expect(ledgerHooks(current.ledger)!.durableSeq).toBeGreaterThanOrEqual(queuedBefore + 1);
  // The flush did not wait for the stream to end: A was still appending when it resolved.
  expect(writtenAtFlush).toBeLessThan(30);
  expect(issued).toBeLessThan(60);
});
