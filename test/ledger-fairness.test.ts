/**
 * A stop is not kept behind other sessions' work in the Ledger (docs/runner.md, "Group commit"):
 * a flush waiting for a write in flight starts its sync as that write completes, before the
 * appends it answered go on; those appends are released a slice per turn of the event loop; a
 * stopping turn's lines are released as soon as they are written, after that turn's earlier lines.
 */
import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { expect, it, vi } from 'vitest';
import { fileHandlePrototype } from './support/file-handle.js';
import { useLedgerEachTest, useLedgerScratch } from './support/ledger-scratch.js';

const SESSIONS = 200;

useLedgerScratch('fullstop-ledger-fairness-');
// The stopped turn's cancelling is never followed by its end here: close does not wait for it.
const current = useLedgerEachTest({ closeWaitMs: 0 });

it(`a stop's flush syncs before ${SESSIONS} other sessions' appends go on, which go on a slice per turn of the loop`, async () => {
  // The stopped turn started earlier; its line is still waiting with the others when the stop writes.
  void current.ledger.append({ sessionId: 'stopped', turnId: 'T', type: 'turn_started' });
  await current.ledger.flush();
  const log: string[] = [];
  let tick = 0;
  let ticking = true;
  const ticker = () => { tick++; if (ticking) setImmediate(ticker); };
  setImmediate(ticker);
  const ticks: number[] = [];

  // The pump's write of the others' lines is held in flight while the stop appends and flushes.
  let releaseWrite!: () => void;
  const writeHeld = new Promise<void>((resolve) => { releaseWrite = resolve; });
  let inWrite!: () => void;
  const writing = new Promise<void>((resolve) => { inWrite = resolve; });
  const proto = await fileHandlePrototype();
  const realWrite = proto.write;
  let held = false;
  vi.spyOn(proto, 'write').mockImplementation(async function (this: FileHandle, ...args: unknown[]) {
    if (!held) { held = true; inWrite(); await writeHeld; }
    return (realWrite as (...a: unknown[]) => Promise<unknown>).apply(this, args);
  } as never);
  // Logged as the call is made (the shared spy runs its hook a microtask later).
  const realSync = fs.fdatasync;
  vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => {
    log.push('sync');
    realSync(fd, callback);
  }) as never);

  const others = Array.from({ length: SESSIONS }, (_, i) => current.ledger.append({ sessionId: `s${i}`, turnId: `t${i}`, type: 'say', text: `${i}` })
    .then(() => { log.push('other'); ticks.push(tick); }));
  void current.ledger.append({ sessionId: 'stopped', turnId: 'T', type: 'say', text: 'before the stop' }).then(() => log.push('T say'));
  await writing;
  const intent = current.ledger.append({ sessionId: 'stopped', turnId: 'T', type: 'status', status: 'cancelling', reason: 'cancel.user' })
    .then(() => log.push('T cancelling'));
  const flushed = current.ledger.flush().then(() => log.push('T flushed'));
  releaseWrite();
  await Promise.all([intent, flushed, ...others]);
  ticking = false;

  // The sync went out before any other session's continuation ran …
  expect(log[0]).toBe('sync');
  // … the stopped turn's lines were released at once, in their order (its say before its cancelling) …
  expect(log.indexOf('T say')).toBeLessThan(log.indexOf('T cancelling'));
  expect(log.indexOf('T cancelling')).toBeLessThan(3);
  // … and the others went on a slice (32) per turn of the event loop, not all at once.
  const perTick = new Map<number, number>();
  for (const t of ticks) perTick.set(t, (perTick.get(t) ?? 0) + 1);
  expect(Math.max(...perTick.values())).toBeLessThanOrEqual(64);
  expect(perTick.size).toBeGreaterThanOrEqual(SESSIONS / 64);
  // Nothing was reordered in the file.
  const seqs = (await current.ledger.entries()).map((e) => e.seq);
  expect(seqs).toEqual(seqs.map((_, i) => i + 1));
});
