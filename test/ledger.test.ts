/**
 * The Ledger (docs/design.md §2, §3): ordered appends, fdatasync on flush, crash repair on open, and the
 * argument checks. Runs against the compiled output in dist/.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { existsSync, fstatSync, readFileSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import {
  INTERRUPTED_TOOL_TEXT, Ledger, TERMINAL_STATUSES, TURN_ABORTED_MARKER, abortedToolText, isTerminalStatus, turnAbortedMarker,
  type LedgerEntry, type LedgerEntryInput, type TurnStatus,
} from '../dist/src/index.js';
import { turnIdsJson } from '../dist/src/ledger/entry.js';
import { ledgerHooks } from '../dist/src/ledger/ledger-hooks.js';
import { turnAppends } from '../dist/src/ledger/turn-append.js';
import { spyOnFdatasync } from './support/fdatasync-spy.js';
import { fileHandlePrototype } from './support/file-handle.js';
import { dir, file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

const HOST_FIXTURE = fileURLToPath(new URL('./fixtures/ledger/host-killed-mid-turn.mjs', import.meta.url));

useLedgerScratch('fullstop-ledger-');

/** The file parsed line by line, independently of the Ledger's own reader. */
function fileLines(path = file): LedgerEntry[] {
  const text = readFileSync(path, 'utf8');
  expect(text.endsWith('\n') || text === '').toBe(true);
  return text.split('\n').slice(0, -1).map((line) => JSON.parse(line) as LedgerEntry);
}

const started = (sessionId: string, turnId: string): LedgerEntryInput => ({ sessionId, turnId, type: 'turn_started' });
const say = (sessionId: string, turnId: string, text: string): LedgerEntryInput => ({ sessionId, turnId, type: 'say', text });
const status = (sessionId: string, turnId: string, s: TurnStatus, reason?: string): LedgerEntryInput => ({ sessionId, turnId, type: 'status', status: s, ...(reason ? { reason } : {}) });

/** Spawns the host fixture, waits for its "ready" (the appends are flushed), SIGKILLs it, waits for its death. */
async function killHostMidTurn(path: string, mode?: string): Promise<void> {
  const child = spawn(process.execPath, [HOST_FIXTURE, path, ...(mode ? [mode] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('ready\n')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`host fixture exited (${code}) before ready: ${stderr}`)));
  });
  child.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
}

describe('appending', () => {
  it('assigns seq 1, 2, 3 … in call order across many un-awaited appends, and entries() equals the file read line by line', async () => {
    const ledger = await openLedger();
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 500; i++) writes.push(ledger.append(say(`s${i % 3}`, `t${i % 7}`, `line ${i}`)));
    await Promise.all(writes);

    const onDisk = fileLines();
    expect(onDisk.map((e) => e.seq)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
    expect(onDisk.map((e) => (e as { text: string }).text)).toEqual(Array.from({ length: 500 }, (_, i) => `line ${i}`));
    expect(await ledger.entries()).toEqual(onDisk);
    for (const entry of onDisk) {
      expect(Object.keys(entry).slice(0, 5)).toEqual(['seq', 'at', 'sessionId', 'turnId', 'type']);
      expect(Number.isInteger(entry.at)).toBe(true);
    }
  });

  it('sends the appends that queue up while a write is in flight out together in one write', async () => {
    const ledger = await openLedger();
    // Both calls the ledger writes with: the pump's asynchronous `write`, a flush's `writeSync`.
    const write = vi.spyOn(await fileHandlePrototype(), 'write');
    const writeSync = vi.spyOn(fs, 'writeSync');
    await Promise.all(Array.from({ length: 100 }, (_, i) => ledger.append(say('s', 't', `${i}`))));
    expect(fileLines()).toHaveLength(100);
    // The first append goes out at once, the other 99 queue behind it and share the next write.
    const writes = write.mock.calls.length + writeSync.mock.calls.length;
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(writes).toBeLessThanOrEqual(2);
    // Appends followed by a flush in the same run: the flush writes them itself, in one writeSync.
    write.mockClear();
    writeSync.mockClear();
    const appended = Array.from({ length: 100 }, (_, i) => ledger.append(say('s', 't', `again ${i}`)));
    await Promise.all([ledger.flush(), ...appended]);
    expect([write.mock.calls.length, writeSync.mock.calls.length]).toEqual([0, 1]);
    expect(fileLines()).toHaveLength(200);
  });

  it('keeps file order = seq order, and every flush covers the appends before it, when flushes write the queue themselves between background writes', async () => {
    const ledger = await openLedger();
    const pending: Promise<unknown>[] = [];
    const flushed: Array<Promise<number>> = [];
    const expectedAtLeast: number[] = [];
    for (let i = 0; i < 200; i++) {
      pending.push(ledger.append(say('s', 't', `${i}`)));
      // A flush right after appends (it writes them itself) or while a background write is in flight.
      // Complete lines only: a later background write may be in flight, its line not yet whole.
      if (i % 7 === 3) flushed.push(ledger.flush().then(() => readFileSync(file, 'utf8').split('\n').length - 1));
      if (i % 7 === 3) expectedAtLeast.push(i + 1);
      if (i % 13 === 5) await Promise.resolve();
      if (i % 29 === 11) await pending.at(-1);
    }
    await Promise.all(pending);
    const seen = await Promise.all(flushed);
    seen.forEach((n, k) => expect(n).toBeGreaterThanOrEqual(expectedAtLeast[k]!));
    const lines = fileLines();
    expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(lines.map((l) => (l as { text: string }).text)).toEqual(Array.from({ length: 200 }, (_, i) => `${i}`));
  });

  it('entries() includes appends made before it that were never awaited', async () => {
    const ledger = await openLedger();
    void ledger.append(started('s', 't'));
    void ledger.append(say('s', 't', 'hello'));
    const entries = await ledger.entries();
    expect(entries.map((e) => e.type)).toEqual(['turn_started', 'say']);
  });

  it('serialises the entry when append() is called, so mutating it afterwards changes nothing', async () => {
    const ledger = await openLedger();
    const args = { path: 'a.txt' };
    const appended = ledger.append({ sessionId: 's', turnId: 't', type: 'tool_call', callId: 'c1', name: 'read', args });
    args.path = 'b.txt';
    await appended;
    expect(fileLines()[0]).toMatchObject({ type: 'tool_call', callId: 'c1', name: 'read', args: { path: 'a.txt' } });
  });

  it('continues seq from the highest seq on disk after a reopen', async () => {
    const first = await openLedger();
    await first.append(started('s', 't1'));
    await first.append(say('s', 't1', 'hi'));
    await first.append(status('s', 't1', 'completed'));
    await first.close();

    const second = await openLedger();
    await second.append(started('s', 't2'));
    expect(fileLines().map((e) => [e.seq, e.turnId, e.type])).toEqual([
      [1, 't1', 'turn_started'], [2, 't1', 'say'], [3, 't1', 'status'], [4, 't2', 'turn_started'],
    ]);
  });

  it('entries() filters by session, by turn, and by both, in seq order', async () => {
    const ledger = await openLedger();
    for (const [s, t] of [['a', 't1'], ['b', 't1'], ['a', 't2'], ['b', 't2'], ['a', 't1']] as const) {
      void ledger.append(say(s, t, `${s}/${t}`));
    }
    const seqs = async (filter?: { sessionId?: string; turnId?: string }) => (await ledger.entries(filter)).map((e) => e.seq);
    expect(await seqs()).toEqual([1, 2, 3, 4, 5]);
    expect(await seqs({ sessionId: 'a' })).toEqual([1, 3, 5]);
    expect(await seqs({ turnId: 't1' })).toEqual([1, 2, 5]);
    expect(await seqs({ sessionId: 'b', turnId: 't2' })).toEqual([4]);
    expect(await seqs({ sessionId: 'nobody' })).toEqual([]);
  });
});

describe('durability', () => {
  it('flush() resolves only after an fdatasync that follows the write of everything appended before it', async () => {
    const ledger = await openLedger();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let synced!: (fileAtSync: string) => void;
    const syncCalled = new Promise<string>((resolve) => { synced = resolve; });
    const datasync = spyOnFdatasync(async () => {
      synced(readFileSync(file, 'utf8'));
      await gate;
    });

    void ledger.append(started('s', 't'));
    void ledger.append(say('s', 't', 'hello'));
    let flushed = false;
    const flushing = ledger.flush().then(() => { flushed = true; });

    const fileAtSync = await syncCalled;
    expect(fileAtSync.split('\n').filter(Boolean).map((l) => JSON.parse(l).type)).toEqual(['turn_started', 'say']);
    // Give a flush that does not wait for the sync every chance to resolve early.
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed).toBe(false);
    release();
    await flushing;
    expect(flushed).toBe(true);
    expect(datasync).toHaveBeenCalledTimes(1);
  });

  it('close() waits for pending appends and fdatasyncs them before closing the file', async () => {
    const ledger = await openLedger();
    const synced: { lines: number; ino: number }[] = [];
    // The real sync fails with EBADF (and close() rejects) if the fd were already closed.
    spyOnFdatasync((fd) => { synced.push({ lines: readFileSync(file, 'utf8').split('\n').filter(Boolean).length, ino: fstatSync(fd).ino }); });
    void ledger.append(started('s', 't'));
    void ledger.append(say('s', 't', 'bye'));
    await ledger.close();
    expect(synced.map((s) => s.lines)).toEqual([2]);
    expect(synced[0]!.ino).toBe(statSync(file).ino); // the sync was of the ledger's own file
  });

  it('close() called while a flush is syncing waits for that sync, then syncs what came after it, before it closes the fd', async () => {
    const ledger = await openLedger();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let firstSync!: () => void;
    const inFirstSync = new Promise<void>((resolve) => { firstSync = resolve; });
    let calls = 0;
    const synced: { ino: number; lines: number }[] = [];
    // The flush's sync is held. A close() that did not wait for it would close the fd under it
    // (the held sync then fails with EBADF, or syncs whatever reused the fd).
    spyOnFdatasync(async () => {
      calls += 1;
      if (calls === 1) { firstSync(); await gate; }
    }, (fd) => { synced.push({ ino: fstatSync(fd).ino, lines: readFileSync(file, 'utf8').split('\n').filter(Boolean).length }); });
    void ledger.append(started('s', 't'));
    const flushing = ledger.flush();
    await inFirstSync;
    void ledger.append(say('s', 't', 'after the first sync began'));
    let closed = false;
    const closing = ledger.close().then(() => { closed = true; });
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    expect(calls).toBe(1); // close()'s sync waits behind the one in flight (one sync at a time)
    release();
    await Promise.all([flushing, closing]);
    expect(synced).toEqual([{ ino: statSync(file).ino, lines: 2 }, { ino: statSync(file).ino, lines: 2 }]);
  });

  it('after a failed write, that append and every later append, flush and close reject with the failure', async () => {
    const ledger = await openLedger();
    vi.spyOn(await fileHandlePrototype(), 'write').mockRejectedValueOnce(
      Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO' }));
    await expect(ledger.append(started('s', 't'))).rejects.toThrow(/writing to ".*history\.jsonl" failed \(EIO/);
    await expect(ledger.append(say('s', 't', 'later'))).rejects.toThrow(/EIO/);
    await expect(ledger.flush()).rejects.toThrow(/EIO/);
    await expect(ledger.close()).rejects.toThrow(/EIO/);
    expect(readFileSync(file, 'utf8')).toBe('');
    // The file was closed and released anyway: it opens again.
    await (await Ledger.open(file)).close();
  });

  it('after a failed fdatasync, that flush and every later append, flush and close reject, though the next sync would succeed', async () => {
    const ledger = await openLedger();
    await ledger.append(started('s', 't'));
    let syncs = 0;
    // Only the first sync fails, as a writeback error is reported once: the next would succeed.
    spyOnFdatasync(() => {
      syncs += 1;
      if (syncs === 1) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
    });
    const failed = await ledger.flush().then(() => undefined, (e: Error) => e);
    expect(failed?.message).toMatch(/syncing ".*history\.jsonl" failed, so what was written since the last good sync may not be on disk \(EIO/);
    expect((failed as Error & { cause: { code: string } }).cause.code).toBe('EIO');
    await expect(ledger.append(say('s', 't', 'later'))).rejects.toBe(failed);
    await expect(ledger.flush()).rejects.toBe(failed);
    await expect(ledger.close()).rejects.toBe(failed);
    expect(syncs).toBe(1); // nothing later was synced as if the failure had not happened
    vi.restoreAllMocks();
    // The file was closed and released; the next open repairs it: the turn that was open is interrupted.
    const reopened = await openLedger(file);
    expect((await reopened.entries()).map((e) => [e.type, (e as { status?: string }).status])).toEqual([['turn_started', undefined], ['status', 'interrupted']]);
  });

  it('a full disk on fdatasync names the file system to free', async () => {
    const ledger = await openLedger();
    await ledger.append(started('s', 't'));
    spyOnFdatasync(() => { throw Object.assign(new Error('ENOSPC: no space left on device, fdatasync'), { code: 'ENOSPC' }); });
    await expect(ledger.flush()).rejects.toThrow(/the disk is full \(ENOSPC\): free space on the file system holding/);
    await expect(ledger.close()).rejects.toThrow(/ENOSPC/);
  });
});

describe('repair on open', () => {
  /** One finished turn's complete entries, written through the Ledger and closed; returns the file's bytes. */
  async function writeFinishedHistory(): Promise<Buffer> {
    const ledger = await openLedger();
    void ledger.append(started('s', 't1'));
    void ledger.append(say('s', 't1', 'done'));
    await ledger.append(status('s', 't1', 'completed'));
    await ledger.close();
    return readFileSync(file);
  }

  it.each([
    ['a cut line without its newline', '{"seq":4,"at":1,"sessionId":"s","tur'],
    ['a complete-looking entry that lost its newline', '{"seq":4,"at":1,"sessionId":"s","turnId":"t2","type":"turn_started"}'],
    ['a last line that is not JSON', '{"seq":4,"at":1,"sess\n'],
    ['zeros from a block that was never written', '\0'.repeat(64)],
  ])('drops a torn last line (%s) and keeps every complete entry byte for byte', async (_label, tail) => {
    const complete = await writeFinishedHistory();
    appendFileSync(file, tail);
    const ledger = await openLedger();
    expect(readFileSync(file)).toEqual(complete);
    expect((await ledger.entries()).map((e) => e.seq)).toEqual([1, 2, 3]);
    await ledger.append(started('s', 't2'));
    expect(fileLines().map((e) => e.seq)).toEqual([1, 2, 3, 4]);
  });

  it('closes a turn without a terminal status as interrupted, one with cancelling as cancelled (marker first), and leaves finished turns alone', async () => {
    // A crash's leftovers: close must not wait for the stop its cancelling starts (no runner will end it).
    const ledger = await openLedger(file, { closeWaitMs: 0 });
    const history: LedgerEntryInput[] = [
      started('a', 'done'), status('a', 'done', 'running'), status('a', 'done', 'completed'),
      started('a', 'lost'), { sessionId: 'a', turnId: 'lost', type: 'tool_call', callId: 'c1', name: 'grep', args: ['x'] },
      started('b', 'stopping'), status('b', 'stopping', 'running'), status('b', 'stopping', 'cancelling', 'cancel.user'),
      started('b', 'failed'), status('b', 'failed', 'failed', 'fatal'),
      started('c', 'cancelled'), status('c', 'cancelled', 'cancelling', 'timeout'), status('c', 'cancelled', 'cancelled', 'timeout'),
      started('c', 'queued'), status('c', 'queued', 'queued'),
    ];
    for (const entry of history) void ledger.append(entry);
    await ledger.close();
    const before = readFileSync(file);

    const reopened = await openLedger();
    const after = readFileSync(file);
    expect(after.subarray(0, before.length)).toEqual(before);
    const added = fileLines().slice(history.length);
    expect(added.every((e) => Number.isInteger(e.at))).toBe(true);
    expect(added.map(({ at: _at, ...rest }) => rest)).toEqual([
      { seq: 16, sessionId: 'a', turnId: 'lost', type: 'tool_aborted', callId: 'c1', output: INTERRUPTED_TOOL_TEXT },
      { seq: 17, sessionId: 'a', turnId: 'lost', type: 'status', status: 'interrupted', reason: 'restart' },
      { seq: 18, sessionId: 'b', turnId: 'stopping', type: 'turn_aborted', text: TURN_ABORTED_MARKER, reason: 'cancel.user' },
      { seq: 19, sessionId: 'b', turnId: 'stopping', type: 'status', status: 'cancelled', reason: 'cancel.user' },
      { seq: 20, sessionId: 'c', turnId: 'queued', type: 'status', status: 'interrupted', reason: 'restart' },
    ]);
    expect(await reopened.entries()).toEqual(fileLines());
  });

  it('flushes its repair to disk before open resolves', async () => {
    const ledger = await openLedger();
    await ledger.append(started('s', 'lost'));
    await ledger.close();
    const datasync = spyOnFdatasync();
    await openLedger();
    expect(datasync).toHaveBeenCalledTimes(1);
    expect(fileLines().at(-1)).toMatchObject({ type: 'status', status: 'interrupted' });
  });

  it('appends nothing when a repaired ledger is opened again', async () => {
    const ledger = await openLedger();
    await ledger.append(started('s', 'lost'));
    await ledger.close();
    await (await Ledger.open(file)).close();
    const repaired = readFileSync(file);
    expect(fileLines().filter((e) => e.type === 'status')).toHaveLength(1);

    await (await Ledger.open(file)).close();
    expect(readFileSync(file)).toEqual(repaired);
  });

  it('reopens the ledger of a host SIGKILLed mid-turn with that turn interrupted', async () => {
    await killHostMidTurn(file);
    const ledger = await openLedger();
    expect((await ledger.entries({ turnId: 'turn-1' })).map((e) => [e.seq, e.type, (e as { status?: string }).status]))
      .toEqual([[1, 'turn_started', undefined], [2, 'tool_call', undefined], [3, 'tool_aborted', undefined], [4, 'status', 'interrupted']]);
    expect(fileLines().at(-1)).toMatchObject({ sessionId: 'host', turnId: 'turn-1', reason: 'restart' });
  });

  it('reopens the ledger of a host SIGKILLed after writing cancelling with that turn cancelled', async () => {
    await killHostMidTurn(file, 'cancelling');
    const ledger = await openLedger();
    const tail = (await ledger.entries()).slice(-3);
    expect(tail[0]).toMatchObject({ seq: 4, type: 'tool_aborted', callId: expect.any(String) });
    expect((tail[0] as { output: string }).output).toMatch(/^aborted by user after \d+\.\ds$/);
    expect(tail[1]).toMatchObject({ seq: 5, type: 'turn_aborted', text: TURN_ABORTED_MARKER });
    expect(tail[2]).toMatchObject({
      seq: 6, sessionId: 'host', turnId: 'turn-1', type: 'status', status: 'cancelled', reason: 'cancel.user',
    });
  });

  it.each([
    ['a line that is not JSON', 'not json at all'],
    ['a line whose seq does not follow', '{"seq":1,"at":1,"sessionId":"s","turnId":"t","type":"say","text":"again"}'],
    ['a line without a sessionId', '{"seq":2,"at":1,"turnId":"t","type":"say","text":"?"}'],
    ['an empty line', ''],
  ])('refuses a ledger with a corrupt middle line (%s), naming the line, and leaves the file untouched', async (_label, bad) => {
    const lines = [
      '{"seq":1,"at":1,"sessionId":"s","turnId":"t","type":"turn_started"}',
      bad,
      '{"seq":3,"at":1,"sessionId":"s","turnId":"t","type":"say","text":"after"}',
    ];
    writeFileSync(file, `${lines.join('\n')}\n`);
    const before = readFileSync(file);
    await expect(Ledger.open(file)).rejects.toThrow(/Ledger\.open: ".*history\.jsonl" line 2 is not a valid ledger entry/);
    expect(readFileSync(file)).toEqual(before);
  });

  it('refuses a last line that is valid JSON but not the next entry, rather than dropping it', async () => {
    writeFileSync(file, '{"seq":5,"at":1,"sessionId":"s","turnId":"t","type":"turn_started"}\n' +
      '{"seq":5,"at":1,"sessionId":"s","turnId":"t","type":"say","text":"dup"}\n');
    const before = readFileSync(file);
    await expect(Ledger.open(file)).rejects.toThrow(/line 2 .*seq 5 does not follow seq 5/);
    expect(readFileSync(file)).toEqual(before);
  });
});

describe('lifecycle and bad input', () => {
  it('rejects a path it cannot open for appending with an error naming the path and the cause, creating no directory', async () => {
    const missing = join(dir, 'no-such-dir', 'history.jsonl');
    await expect(Ledger.open(missing)).rejects.toThrow(`Ledger.open: cannot open "${missing}" for appending: ENOENT`);
    expect(existsSync(join(dir, 'no-such-dir'))).toBe(false);

    writeFileSync(join(dir, 'a-file'), '');
    const underFile = join(dir, 'a-file', 'history.jsonl');
    await expect(Ledger.open(underFile)).rejects.toThrow(`Ledger.open: cannot open "${underFile}" for appending: ENOTDIR`);
    await expect(Ledger.open(dir)).rejects.toThrow(`Ledger.open: cannot open "${dir}" for appending: EISDIR`);
  });

  it('refuses a second Ledger on a file that is already open in this process', async () => {
    const ledger = await openLedger();
    await expect(Ledger.open(file)).rejects.toThrow(/already open in this process/);
    await ledger.close();
    await (await Ledger.open(file)).close();
  });

  it('rejects append after close, and close twice, flush after close and asyncDispose are fine', async () => {
    const ledger = await openLedger();
    await ledger.append(started('s', 't'));
    const closing = ledger.close();
    await expect(ledger.append(say('s', 't', 'late'))).rejects.toThrow(`Ledger.append: the ledger "${file}" is closed`);
    await closing;
    await expect(ledger.close()).resolves.toBeUndefined();
    await expect(ledger.flush()).resolves.toBeUndefined();
    await expect(ledger[Symbol.asyncDispose]()).resolves.toBeUndefined();
    expect((await ledger.entries()).map((e) => e.type)).toEqual(['turn_started']);
  });

  it('throws a TypeError for an empty or non-string path', async () => {
    await expect(Ledger.open('')).rejects.toThrow(TypeError);
    await expect(Ledger.open(42 as unknown as string)).rejects.toThrow(/Ledger\.open: path: expected a non-empty string, got 42/);
  });

  it.each([
    ['a missing sessionId', { turnId: 't', type: 'turn_started' }, /entry\.sessionId: expected a non-empty string, got undefined/],
    ['an empty sessionId', { sessionId: '', turnId: 't', type: 'turn_started' }, /entry\.sessionId: .*got ""/],
    ['a missing turnId', { sessionId: 's', type: 'turn_started' }, /entry\.turnId/],
    ['an unknown type', { sessionId: 's', turnId: 't', type: 'nap' }, /entry\.type: expected one of .*got "nap"/],
    ['a tool_call without callId', { sessionId: 's', turnId: 't', type: 'tool_call', name: 'x' }, /entry\.callId/],
    ['a tool_output without success', { sessionId: 's', turnId: 't', type: 'tool_output', callId: 'c', output: 'o' }, /entry\.success/],
    ['an unknown status', { sessionId: 's', turnId: 't', type: 'status', status: 'paused' }, /entry\.status: expected one of/],
    ['a say without text', { sessionId: 's', turnId: 't', type: 'say' }, /entry\.text: expected a string/],
    ['a supplied seq', { seq: 9, sessionId: 's', turnId: 't', type: 'turn_started' }, /entry\.seq: assigned by the ledger/],
    ['a supplied at', { at: 1, sessionId: 's', turnId: 't', type: 'turn_started' }, /entry\.at: assigned by the ledger/],
    ['a value JSON cannot encode', { sessionId: 's', turnId: 't', type: 'tool_call', callId: 'c', name: 'n', args: 1n }, /not JSON-serialisable/],
    ['null', null, /expected an entry object, got null/],
  ])('rejects %s with a TypeError naming it, writing nothing and using no seq', async (_label, entry, message) => {
    const ledger = await openLedger();
    const appended = ledger.append(entry as unknown as LedgerEntryInput);
    await expect(appended).rejects.toThrow(TypeError);
    await expect(appended).rejects.toThrow(message);
    await ledger.flush();
    expect(readFileSync(file, 'utf8')).toBe('');
    await ledger.append(started('s', 't'));
    expect(fileLines().map((e) => e.seq)).toEqual([1]);
  });

  it('throws a TypeError for filter values that are not non-empty strings', async () => {
    const ledger = await openLedger();
    await expect(ledger.entries({ sessionId: 7 as unknown as string })).rejects.toThrow(/filter\.sessionId: expected a non-empty string, got 7/);
    await expect(ledger.entries({ turnId: null as unknown as string })).rejects.toThrow(/filter\.turnId/);
    await expect(ledger.entries('s' as never)).rejects.toThrow(/filter: expected an object/);
  });
});

describe('helpers', () => {
  it.each([
    [0, 'aborted by user after 0.1s'],
    [40, 'aborted by user after 0.1s'],
    [-25, 'aborted by user after 0.1s'],
    [160, 'aborted by user after 0.2s'],
    [2345, 'aborted by user after 2.3s'],
    [2360, 'aborted by user after 2.4s'],
    [61_000, 'aborted by user after 61.0s'],
  ])('abortedToolText(%d) is %j: one decimal, never below 0.1 s', (elapsedMs, text) => {
    expect(abortedToolText(elapsedMs)).toBe(text);
  });

  it('abortedToolText refuses a non-number or a non-finite number', () => {
    expect(() => abortedToolText('5' as unknown as number)).toThrow(TypeError);
    expect(() => abortedToolText(Number.NaN)).toThrow(RangeError);
  });

  it('the turn_aborted marker says the stop was deliberate, background work may run on (only when some does), and aborted tools may have partly run', () => {
    expect(TURN_ABORTED_MARKER).toMatch(/on purpose/);
    expect(TURN_ABORTED_MARKER).not.toMatch(/background processes/i);
    expect(turnAbortedMarker(undefined, { backgroundRunning: true })).toMatch(/background processes .* may still be running/i);
    expect(TURN_ABORTED_MARKER).toMatch(/aborted may have partly executed/);
  });

  it('the terminal statuses are exactly completed, failed, cancelled and interrupted', () => {
    expect([...TERMINAL_STATUSES]).toEqual(['completed', 'failed', 'cancelled', 'interrupted']);
    expect(['queued', 'running', 'cancelling', 'completed', 'failed', 'cancelled', 'interrupted', 'nope', 3]
      .filter(isTerminalStatus)).toEqual(['completed', 'failed', 'cancelled', 'interrupted']);
  });
});

describe("the runner's own path (turnAppends)", () => {
  const [sessionId, turnId] = ['sess "quoted" é', 'turn-1'];
  const bodies = [
    { type: 'turn_started' },
    { type: 'tool_call', callId: 'call-1', name: 'grep', args: { q: 'x', n: [1, 2] } },
    { type: 'tool_call', callId: 'call-2', name: 'now', args: null },
    { type: 'tool_call', callId: 'call-3', name: 'bare', args: undefined },
    { type: 'tool_call', callId: 'call-4', name: 'none' },
    { type: 'tool_output', callId: 'call-1', output: { hits: 3 }, success: true },
    { type: 'tool_output', callId: 'call-2', output: undefined, success: false },
    { type: 'tool_aborted', callId: 'call-1', output: abortedToolText(1234) },
    { type: 'say', text: 'line\nwith "quotes" and \u2028' },
    { type: 'status', status: 'cancelling', reason: 'cancel.user' },
    { type: 'status', status: 'running' },
    { type: 'turn_aborted', text: TURN_ABORTED_MARKER },
  ] as const;

  it('writes the same bytes as append() of the same entry, in the same seq order', async () => {
    // Its cancelling starts no stop a runner will end: close does not wait for one.
    const [viaAppend, viaTurn] = [await openLedger(join(dir, 'a.jsonl'), { closeWaitMs: 0 }), await openLedger(join(dir, 'b.jsonl'), { closeWaitMs: 0 })];
    const now = vi.spyOn(Date, 'now').mockReturnValue(1_700_000_000_000);
    await Promise.all(bodies.flatMap((body) => [
      viaAppend.append({ ...body, sessionId, turnId } as LedgerEntryInput), turnAppends(viaTurn)!(sessionId, turnId)(body as never)]));
    now.mockRestore();
    await Promise.all([viaAppend.close(), viaTurn.close()]);
    const [a, b] = [readFileSync(join(dir, 'a.jsonl'), 'utf8'), readFileSync(join(dir, 'b.jsonl'), 'utf8')];
    expect(b).toBe(a);
    expect(b.trimEnd().split('\n').map((l) => JSON.parse(l).seq)).toEqual(bodies.map((_, i) => i + 1));
  });

  it('checks the fields as append() does and refuses what it cannot write, leaving nothing written', async () => {
    const ledger = await openLedger(file);
    const write = turnAppends(ledger)!(sessionId, turnId);
    await expect(write({ type: 'say', text: 5 } as never)).rejects.toThrow(/entry\.text: expected a string, got 5/);
    await expect(write({ type: 'nope' } as never)).rejects.toThrow(/entry\.type: expected one of/);
    await expect(write({ type: 'toString' } as never)).rejects.toThrow(TypeError);
    await expect(write({ type: 'tool_output', callId: 'c', output: 1n, success: true } as never))
      .rejects.toThrow(/not JSON-serialisable/);
    expect(() => turnIdsJson('', turnId)).toThrow(/entry\.sessionId/);
    await write({ type: 'turn_started' });
    await expect(write({ type: 'turn_started' })).rejects.toThrow(/already in/);
    await ledger.close();
    await expect(write({ type: 'say', text: 'late' })).rejects.toThrow(/is closed/);
    expect(readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => [JSON.parse(l).seq, JSON.parse(l).type])).toEqual([[1, 'turn_started']]);
  });
});
