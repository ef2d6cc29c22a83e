/**
 * The Ledger keeps the file true and openable under hostile entries, exhausted seqs, reused turn
 * ids, a second writer (another process too), a file replaced under it, and a full disk.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type LedgerEntryInput } from '../dist/src/index.js';
import { mountSmallDisk, unmountSmallDisk, type SmallDisk } from './support/small-disk.js';
import { closeLedgers, dir, file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

const HOLDER = fileURLToPath(new URL('./fixtures/ledger/holds-open.mjs', import.meta.url));

useLedgerScratch('fullstop-ledger-faults-');

/** Opens the file again in a fresh Ledger and closes it: throws if the file is no longer readable. */
async function reopens(path = file): Promise<void> {
  const ledger = await Ledger.open(path);
  await ledger.close();
}

describe('an entry is a snapshot, checked before it is written', () => {
  it('an entry with its own toJSON is a TypeError and nothing is written', async () => {
    const ledger = await openLedger();
    const entry = { sessionId: 's', turnId: 't', type: 'turn_started', toJSON: () => ({ seq: 99, sessionId: 5 }) };
    await expect(ledger.append(entry as never)).rejects.toThrow(/entry\.toJSON/);
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 't', type: 'status', status: 'completed' });
    await ledger.close();
    await reopens();
    expect(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).seq)).toEqual([1, 2]);
  });

  it('a getter that changes between reads is read once: the line says what was checked, and the file stays openable', async () => {
    const ledger = await openLedger();
    let reads = 0;
    const entry = { turnId: 't', type: 'turn_started', get sessionId() { return reads++ === 0 ? 's' : 5; } };
    await ledger.append(entry as never).catch((e) => expect(e).toBeInstanceOf(TypeError));
    await ledger.append({ sessionId: 's', turnId: 't2', type: 'turn_started' });
    await ledger.close();
    await reopens();
    for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) expect(typeof JSON.parse(line).sessionId).toBe('string');
  });

  it('a Proxy hiding seq from `in` is a TypeError at append, and the file stays openable', async () => {
    const ledger = await openLedger();
    const target = { sessionId: 's', turnId: 't', type: 'say', text: 'hi', seq: 1000 };
    const entry = new Proxy(target, { has: (t, k) => k !== 'seq' && k in t });
    await expect(ledger.append(entry as never)).rejects.toThrow(TypeError);
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 't', type: 'say', text: 'after' });
    await ledger.close();
    await reopens();
  });

  it('a Proxy whose traps throw is a TypeError at append', async () => {
    const ledger = await openLedger();
    const entry = new Proxy({}, { ownKeys: () => { throw new Error('trap'); } });
    await expect(ledger.append(entry as never)).rejects.toThrow(/fields cannot be read \(Error: trap\)|fields cannot be read \(trap\)/);
  });
});

describe('seq', () => {
  it('an append past Number.MAX_SAFE_INTEGER is refused, and the file stays openable', async () => {
    const max = Number.MAX_SAFE_INTEGER;
    writeFileSync(file, `${JSON.stringify({ seq: max - 1, at: 1, sessionId: 's', turnId: 't', type: 'turn_started' })}\n`);
    const ledger = await openLedger();
    // The repair of the open turn took the last seq there is.
    expect((await ledger.entries()).map((e) => e.seq)).toEqual([max - 1, max]);
    await expect(ledger.append({ sessionId: 's', turnId: 't2', type: 'turn_started' })).rejects.toThrow(RangeError);
    await expect(ledger.append({ sessionId: 's', turnId: 't2', type: 'turn_started' })).rejects.toThrow(/start a new ledger file/);
    await ledger.close();
    await reopens();
  });
});

describe('turn ids', () => {
  it('a turn_started of a turn the file already holds is refused, before and after a reopen', async () => {
    const ledger = await openLedger();
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 't', type: 'status', status: 'completed' });
    await expect(ledger.append({ sessionId: 'other', turnId: 't', type: 'turn_started' })).rejects.toThrow(/turn "t" is already in/);
    expect(ledger.hasTurn('t')).toBe(true);
    expect(ledger.hasTurn('u')).toBe(false);
    await ledger.close();
    const reopened = await openLedger();
    await expect(reopened.append({ sessionId: 's', turnId: 't', type: 'turn_started' } as LedgerEntryInput)).rejects.toThrow(/already in/);
    expect(() => reopened.hasTurn('' as never)).toThrow(TypeError);
  });
});

describe('one writer per file', () => {
  it('a second open from another process fails naming the holder; once the holder is SIGKILLed the file opens at once', async () => {
    const child = spawn(process.execPath, [HOLDER, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (d) => { if (String(d).includes('ready')) resolve(); });
        child.once('exit', (code) => reject(new Error(`holder exited early (${code})`)));
      });
      await expect(Ledger.open(file)).rejects.toThrow(new RegExp(`already open for writing by pid ${child.pid} on host`));
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    const t0 = performance.now();
    await openLedger();
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it.each(['the real file', 'a symlink'])('a second process that opens the ledger through a symlink, while another holds it through %s, fails naming the holder', async (holderPath) => {
    // The links live in another directory, so the paths share nothing but the file they name.
    const elsewhere = mkdtempSync(join(tmpdir(), 'fullstop-ledger-link-'));
    const [mine, theirs] = [join(elsewhere, 'mine.jsonl'), join(elsewhere, 'theirs.jsonl')];
    symlinkSync(file, mine);
    symlinkSync(file, theirs);
    const child = spawn(process.execPath, [HOLDER, holderPath === 'a symlink' ? theirs : file], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (d) => { if (String(d).includes('ready')) resolve(); });
        child.once('exit', (code) => reject(new Error(`holder exited early (${code})`)));
      });
      const refused = await Ledger.open(mine).then(() => undefined, (e: Error) => e);
      expect(refused?.message).toMatch(new RegExp(`already open for writing by pid ${child.pid} on host`));
      expect(refused?.message).toContain(`"${mine}" (the file "${realpathSync(file)}")`);
      expect(readFileSync(`${realpathSync(file)}.lock`, 'utf8')).toContain(`"pid":${child.pid}`);
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('close() gives the lock back: a lock file exists only while the ledger is open', async () => {
    const ledger = await openLedger();
    expect(() => readFileSync(`${file}.lock`)).not.toThrow();
    expect(JSON.parse(readFileSync(`${file}.lock`, 'utf8'))).toMatchObject({ pid: process.pid });
    await ledger.close();
    expect(() => readFileSync(`${file}.lock`)).toThrow(/ENOENT/);
  });

  it('a lock that names no holder is not taken over silently', async () => {
    writeFileSync(`${file}.lock`, 'garbage');
    await expect(Ledger.open(file)).rejects.toThrow(/does not name a holder; if no process has the ledger open, delete that lock file/);
  });
});

describe('entries() reads the file it opened', () => {
  it('not whatever is at the path now; after close it refuses a replaced file', async () => {
    const ledger = await openLedger();
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    renameSync(file, join(dir, 'moved.jsonl'));
    writeFileSync(file, `${JSON.stringify({ seq: 1, at: 1, sessionId: 'impostor', turnId: 'x', type: 'turn_started' })}\n`);
    expect((await ledger.entries()).map((e) => e.sessionId)).toEqual(['s']);
    await ledger.close();
    await expect(ledger.entries()).rejects.toThrow(/no longer the file this ledger wrote/);
  });
});

describe('on a full disk (a 64 KiB tmpfs)', () => {
  let disk: SmallDisk;

  beforeEach(() => {
    disk = mountSmallDisk(dir);
  });

  afterEach(async () => {
    await closeLedgers();
    unmountSmallDisk(disk);
  });

  it('a failed write says the disk is full; open then says so and what to free; after freeing, open repairs the turn', async (ctx) => {
    if (!disk.mounted) {
      console.log(`skipped: cannot mount a tmpfs here (${disk.refused})`);
      ctx.skip();
    }
    const path = join(disk.mnt, 'history.jsonl');
    const ledger = await Ledger.open(path);
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 't', type: 'tool_call', callId: 'c1', name: 'x', args: {} });
    // End the file at a page boundary (tmpfs allocates pages), so its next byte needs a new page.
    const overhead = JSON.stringify({ seq: 3, at: Date.now(), sessionId: 's', turnId: 't', type: 'say', text: '' }).length + 1;
    let pad = 4096 - (statSync(path).size % 4096);
    if (pad < overhead) pad += 4096;
    await ledger.append({ sessionId: 's', turnId: 't', type: 'say', text: 'x'.repeat(pad - overhead) });
    try { writeFileSync(join(disk.mnt, 'filler'), Buffer.alloc(128 * 1024)); } catch { /* ENOSPC: full */ }
    const failure = await ledger.append({ sessionId: 's', turnId: 't', type: 'say', text: 'more' }).then(() => undefined, (e: Error) => e);
    expect(failure?.message).toMatch(/the disk is full \(ENOSPC\): free space on the file system holding/);
    await ledger.close().catch(() => {});
    // Closing gave back the lock file's page: take it too.
    try { writeFileSync(join(disk.mnt, 'filler2'), Buffer.alloc(64 * 1024)); } catch { /* ENOSPC: full again */ }

    await expect(Ledger.open(path)).rejects.toThrow(/the disk is full \(ENOSPC; \d+ bytes free on the file system holding ".*"\)\. Free space there/);
    rmSync(join(disk.mnt, 'filler'));
    rmSync(join(disk.mnt, 'filler2'));
    const reopened = await openLedger(path);
    expect((await reopened.entries()).map((e) => e.type)).toEqual(['turn_started', 'tool_call', 'say', 'tool_aborted', 'status']);
  });
});
