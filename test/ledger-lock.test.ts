/**
 * The lock of a file ledger across hosts (docs/ledger.md, "The lock"): a holder keeps its lock
 * fresh, a lock not refreshed for its stale time is taken over whatever the host that wrote it (a
 * restarted container has a new hostname), a lock its live holder keeps fresh is refused, and of
 * several processes taking over one stale lock at once exactly one wins. Runs against dist/.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Ledger } from '../dist/src/index.js';
import { DEFAULT_LEDGER_LOCK_STALE_MS } from '../dist/src/constants.js';
import { file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-lock-');

const HOLDER = fileURLToPath(new URL('./fixtures/ledger/lock-holder.mjs', import.meta.url));

/** A lock as a process on another host wrote it (before this version: no stale time in it). */
function foreignLock(host: string, ageMs: number): void {
  writeFileSync(`${file}.lock`, JSON.stringify({ pid: 4242, startTime: 77, host }));
  const at = (Date.now() - ageMs) / 1000;
  utimesSync(`${file}.lock`, at, at);
}

/** Spawns the lock-holder fixture; resolves once it said "ready". */
async function holder(args: string[]): Promise<{ child: ChildProcess; lines: string[]; next(): Promise<string> }> {
  const child = spawn(process.execPath, [HOLDER, file, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let buffered = '';
  child.stdout!.on('data', (d) => {
    buffered += String(d);
    for (let i = buffered.indexOf('\n'); i !== -1; i = buffered.indexOf('\n')) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      const waiter = waiting.shift();
      if (waiter !== undefined) waiter(line);
      else lines.push(line);
    }
  });
  const next = () => (lines.length > 0 ? Promise.resolve(lines.shift()!) : new Promise<string>((resolve, reject) => {
    waiting.push(resolve);
    child.once('exit', (code) => reject(new Error(`lock holder exited (${code})`)));
  }));
  expect(await next()).toBe('ready');
  return { child, lines, next };
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** Resolves once the lock file's mtime has changed `times` times (the holder refreshed it); a liveness bound of 15 s. */
async function refreshed(times: number): Promise<void> {
  let last = statSync(`${file}.lock`).mtimeMs;
  for (let seen = 0, t0 = Date.now(); seen < times; await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() - t0 > 15_000) throw new Error(`the lock was refreshed ${seen} times in 15 s, not ${times}`);
    const now = statSync(`${file}.lock`).mtimeMs;
    if (now !== last) seen += 1;
    last = now;
  }
}

describe('a lock naming another host', () => {
  it('not refreshed for its stale time (a restarted container) is taken over: the open succeeds', async () => {
    foreignLock('pod-before-restart', 10 * 60_000);
    const ledger = await openLedger();
    expect(JSON.parse(readFileSync(`${file}.lock`, 'utf8'))).toMatchObject({ pid: process.pid });
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
  });

  it('that its live holder keeps fresh is refused, naming the holder; once the holder is killed, the open succeeds after the stale time', async () => {
    // A stale time of 2.4 s (a refresh every 800 ms): a loaded machine's timer delays stay well inside it.
    const { child } = await holder(['pod-a', '2400', 'hold']);
    try {
      // Past the stale time since the holder opened: only its refreshes keep the lock.
      await refreshed(4);
      await expect(Ledger.open(file)).rejects.toThrow(/already open for writing by pid \d+ on host "pod-a".*refreshed/);
    } finally {
      await kill(child);
    }
    let opened: Ledger | undefined;
    for (const t0 = Date.now(); opened === undefined && Date.now() - t0 < 15_000; await new Promise((r) => setTimeout(r, 100))) {
      opened = await openLedger().catch(() => undefined);
    }
    expect(opened).toBeDefined();
  });
});

describe('racing takeovers', () => {
  it('of one stale lock by four processes at once: exactly one opens the ledger, the others are refused naming it', async () => {
    foreignLock('pod-before-restart', 10 * 60_000);
    const racers = await Promise.all(Array.from({ length: 4 }, () => holder(['-', '-', 'race'])));
    try {
      for (const { child } of racers) child.stdin!.write('go\n');
      const results = await Promise.all(racers.map(({ next }) => next()));
      expect(results.filter((r) => r === 'open')).toHaveLength(1);
      const winner = racers[results.indexOf('open')]!.child.pid;
      for (const result of results.filter((r) => r !== 'open')) expect(result).toMatch(new RegExp(`^refused .*already open for writing by pid ${winner} `));
    } finally {
      for (const { child } of racers) child.stdin!.end();
      await Promise.all(racers.map(({ child }) => new Promise((resolve) => {
        if (child.exitCode !== null) resolve(undefined);
        else child.once('exit', resolve);
      })));
    }
  });
});

describe('lockStaleMs', () => {
  it('is written into the lock (30 s unless told), and a bad value is refused naming the option', async () => {
    const ledger = await openLedger();
    expect(JSON.parse(readFileSync(`${file}.lock`, 'utf8'))).toMatchObject({ staleMs: DEFAULT_LEDGER_LOCK_STALE_MS });
    expect(DEFAULT_LEDGER_LOCK_STALE_MS).toBe(30_000);
    await ledger.close();
    await expect(Ledger.open(file, { lockStaleMs: 2 })).rejects.toThrow(/options\.lockStaleMs: expected at least 3 ms/);
    await expect(Ledger.open(file, { lockStaleMs: '1' as never })).rejects.toThrow(TypeError);
  });
});

describe('the holder', () => {
  it('never keeps its process alive: a process with a ledger open and nothing else to do exits', async () => {
    const ledgerModule = new URL('../dist/src/ledger/ledger.js', import.meta.url).href;
    const script = `const { Ledger } = await import(${JSON.stringify(ledgerModule)}); await Ledger.open(${JSON.stringify(file)}, { lockStaleMs: 300 }); console.log('open');`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 });
    expect(stdout).toBe('open\n');
  });

  it('keeps its lock fresh while open, and removes it at close', async () => {
    const ledger = await openLedger(file, { lockStaleMs: 300 });
    await refreshed(2);
    await ledger.close();
    expect(() => statSync(`${file}.lock`)).toThrow(/ENOENT/);
  });

  it('whose lock was taken over (it did not refresh it in time) stops writing: later appends reject naming the lock', async () => {
    const ledger = await openLedger(file, { lockStaleMs: 300 });
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: 4242, startTime: 77, host: 'pod-b', staleMs: 30_000 }));
    let refusal: string | undefined;
    for (const t0 = Date.now(); refusal === undefined && Date.now() - t0 < 10_000; await new Promise((r) => setTimeout(r, 50))) {
      refusal = await ledger.append({ sessionId: 's', turnId: `t${Date.now()}`, type: 'turn_started' }).then(() => undefined, (e: Error) => e.message);
    }
    expect(refusal).toMatch(/lock .*was taken over by pid 4242 on host "pod-b"/);
  });
});
