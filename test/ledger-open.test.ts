/**
 * Ledger.open reads the file as a stream (docs/ledger.md, "Open and repair"): a hole of zeros a
 * power loss left is cut and reported, never refused; a bad line is named (path, line, byte):
 * not UTF-8, too long; ids longer than today's bound still read and are repaired. Runs against dist/.
 */
import { readFileSync, rmSync, writeFileSync, openSync, writeSync, closeSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Ledger, type LedgerEntry } from '../dist/src/index.js';
import { LEDGER_MAX_LINE_BYTES } from '../dist/src/constants.js';
import { ledgerHooks } from '../dist/src/ledger/ledger-hooks.js';
import { file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-open-');

function line(seq: number, sessionId: string, turnId: string, body: Record<string, unknown>): string {
  return `${JSON.stringify({ seq, at: 1_700_000_000_000 + seq, sessionId, turnId, ...body })}\n`;
}

function onDisk(path = file): LedgerEntry[] {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as LedgerEntry);
}

/** Resolves with the next process warning of `code` (Ledger.open reports a cut with one). */
function nextWarning(code: string): Promise<Error & { code?: string }> {
  return new Promise((resolve) => {
    const on = (warning: Error & { code?: string }) => {
      if (warning.code !== code) return;
      process.off('warning', on);
      resolve(warning);
    };
    process.on('warning', on);
  });
}

describe('a hole of zeros a power loss left', () => {
  it('is cut with everything after it, kept aside and reported, and the turns it cut are repaired', async () => {
    const kept = line(1, 's', 't1', { type: 'turn_started' }) + line(2, 's', 't1', { type: 'tool_call', callId: 'c1', name: 'grep', args: null });
    // Lines that did land after a page the OS never wrote back: the page reads as zeros, in the middle of a line.
    const lost = line(3, 's', 't1', { type: 'tool_output', callId: 'c1', output: 'x'.repeat(200), success: true });
    const after = Array.from({ length: 20 }, (_, i) => line(4 + i, 's', 't1', { type: 'say', text: `later ${i}` })).join('');
    const tail = Buffer.from(lost.slice(0, 40) + '\0'.repeat(4096) + lost.slice(40) + after);
    writeFileSync(file, Buffer.concat([Buffer.from(kept), tail]));
    const warned = nextWarning('FULLSTOP_LEDGER_CUT');

    const ledger = await openLedger();
    expect((await warned).message).toMatch(/cut \d+ bytes \(21 lines\) off the end of ".*history\.jsonl": a hole of zeros/);
    expect(ledger.repair).toEqual({ cut: { bytes: tail.length, lines: 21, hole: true, savedTo: `${file}.cut-${kept.length}` }, closedTurns: 1 });
    // Nothing is deleted: the cut bytes are in the side file, byte for byte.
    expect(readFileSync(ledger.repair.cut!.savedTo!)).toEqual(tail);
    // The turn the hole cut is closed as after a crash: its call aborted, the turn interrupted.
    const entries = onDisk();
    expect(entries.map((e) => [e.seq, e.type])).toEqual([[1, 'turn_started'], [2, 'tool_call'], [3, 'tool_aborted'], [4, 'status']]);
    expect(entries[3]).toMatchObject({ status: 'interrupted', reason: 'restart' });
    expect(await ledger.entries()).toEqual(entries);
  });

  it('is cut when it is the whole tail too (zeros up to the end), and a clean file reports nothing', async () => {
    writeFileSync(file, line(1, 's', 't1', { type: 'turn_started' }) + line(2, 's', 't1', { type: 'status', status: 'completed' }) + '\0'.repeat(8192));
    const ledger = await openLedger();
    expect(ledger.repair).toEqual({ cut: { bytes: 8192, lines: 1, hole: true, savedTo: `${file}.cut-${readFileSync(file).length}` }, closedTurns: 0 });
    await ledger.close();
    const again = await openLedger();
    expect(again.repair).toEqual({ closedTurns: 0 });
    expect(onDisk()).toHaveLength(2);
  });
  it('keeps an earlier cut at the same byte: a second one goes to a file of its own', async () => {
    const kept = line(1, 's', 't1', { type: 'turn_started' });
    writeFileSync(file, kept + '\0'.repeat(100) + line(2, 's', 't1', { type: 'say', text: 'first' }));
    let ledger = await openLedger();
    const first = ledger.repair.cut!.savedTo!;
    await ledger.close();
    writeFileSync(file, kept + '\0'.repeat(100) + line(2, 's', 't1', { type: 'say', text: 'second' }));
    ledger = await openLedger();
    expect(ledger.repair.cut!.savedTo).toBe(`${first}.1`);
    expect(readFileSync(first, 'utf8')).toContain('first');
    expect(readFileSync(`${first}.1`, 'utf8')).toContain('second');
  });
});

describe('a bad line is named', () => {
  it('refuses a middle line that is not UTF-8 (naming the file, the line and the byte) instead of reading U+FFFD, and leaves the file untouched', async () => {
    const bad = Buffer.concat([Buffer.from(line(2, 's', 't', { type: 'say', text: 'ab' }).slice(0, 60)), Buffer.from([0xc3, 0x28]),
      Buffer.from(line(2, 's', 't', { type: 'say', text: 'ab' }).slice(60))]);
    const bytes = Buffer.concat([Buffer.from(line(1, 's', 't', { type: 'turn_started' })), bad, Buffer.from(line(3, 's', 't', { type: 'say', text: 'c' }))]);
    writeFileSync(file, bytes);
    await expect(Ledger.open(file)).rejects.toThrow(/Ledger\.open: ".*history\.jsonl" line 2 is not a valid ledger entry \(it holds bytes that are not UTF-8; the line starts at byte \d+\)/);
    expect(readFileSync(file)).toEqual(bytes);
  });

  it(`refuses a line longer than LEDGER_MAX_LINE_BYTES naming the file and the line, and never appends one`, async () => {
    const fd = openSync(file, 'w');
    writeSync(fd, line(1, 's', 't', { type: 'turn_started' }));
    writeSync(fd, '{"seq":2,"at":1,"sessionId":"s","turnId":"t","type":"say","text":"');
    const piece = Buffer.alloc(8 * 1024 * 1024, 'x');
    for (let written = 0; written <= LEDGER_MAX_LINE_BYTES; written += piece.length) writeSync(fd, piece);
    writeSync(fd, '"}\n');
    writeSync(fd, line(3, 's', 't', { type: 'say', text: 'after' }));
    closeSync(fd);
    await expect(Ledger.open(file)).rejects.toThrow(/Ledger\.open: ".*history\.jsonl" line 2 \(at byte \d+\) is longer than 134217728 bytes/);
    rmSync(file);

    const ledger = await openLedger();
    const text = 'y'.repeat(LEDGER_MAX_LINE_BYTES);
    await expect(ledger.append({ sessionId: 's', turnId: 't', type: 'say', text })).rejects.toThrow(RangeError);
    expect(ledgerHooks(ledger)!.seq).toBe(0);
  });
});

describe('ids written before ids were bounded', () => {
  it('reads a file whose ids are longer than MAX_ID_LENGTH and repairs its open turn with them', async () => {
    const session = `s${'x'.repeat(3000)}`;
    const turn = `t${'y'.repeat(3000)}`;
    const call = `c${'z'.repeat(3000)}`;
    writeFileSync(file, line(1, session, turn, { type: 'turn_started' }) + line(2, session, turn, { type: 'tool_call', callId: call, name: 'n', args: null }));
    const ledger = await openLedger();
    expect(ledger.repair.closedTurns).toBe(1);
    const entries = onDisk();
    expect(entries.map((e) => e.type)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status']);
    expect(entries.every((e) => e.sessionId === session && e.turnId === turn)).toBe(true);
    expect(entries[2]).toMatchObject({ callId: call });
    expect((await ledger.entries()).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
  });
});

describe('paging: entries({ sessionId, turnId, afterSeq, limit })', () => {
  it('returns the entries after afterSeq, at most limit, with and without a session', async () => {
    const ledger = await openLedger();
    for (let i = 0; i < 30; i++) void ledger.append({ sessionId: `s${i % 3}`, turnId: `t${i % 3}`, type: 'say', text: `${i}` });
    await ledger.flush();
    const s1 = (await ledger.entries({ sessionId: 's1' })).map((e) => e.seq);
    expect(s1).toEqual([2, 5, 8, 11, 14, 17, 20, 23, 26, 29]);
    expect((await ledger.entries({ sessionId: 's1', afterSeq: 8, limit: 3 })).map((e) => e.seq)).toEqual([11, 14, 17]);
    expect((await ledger.entries({ sessionId: 's1', turnId: 't1', afterSeq: 26 })).map((e) => e.seq)).toEqual([29]);
    expect((await ledger.entries({ afterSeq: 27 })).map((e) => e.seq)).toEqual([28, 29, 30]);
    expect((await ledger.entries({ limit: 2 })).map((e) => e.seq)).toEqual([1, 2]);
    // Paging through a session a page at a time gives the session, in order.
    const pages: number[] = [];
    for (let after = 0; ;) {
      const page = await ledger.entries({ sessionId: 's2', afterSeq: after, limit: 4 });
      if (page.length === 0) break;
      pages.push(...page.map((e) => e.seq));
      after = page.at(-1)!.seq;
    }
    expect(pages).toEqual((await ledger.entries({ sessionId: 's2' })).map((e) => e.seq));
  });

  it.each([
    [{ afterSeq: -1 }, RangeError, /filter\.afterSeq/],
    [{ afterSeq: 1.5 }, RangeError, /filter\.afterSeq/],
    [{ afterSeq: '3' }, TypeError, /filter\.afterSeq/],
    [{ limit: 0 }, RangeError, /filter\.limit/],
    [{ limit: Infinity }, RangeError, /filter\.limit/],
    [{ limit: null }, TypeError, /filter\.limit/],
  ])('refuses %j with the field named', async (filter, type, message) => {
    const ledger = await openLedger();
    await expect(ledger.entries(filter as never)).rejects.toThrow(type);
    await expect(ledger.entries(filter as never)).rejects.toThrow(message);
  });
});

describe('segments: Ledger.open(path, { segmentBytes })', () => {
  it('seals the file by size, reads across segments (also after a reopen), repairs a turn that spans them, and removes old ones', async () => {
    let ledger = await openLedger(file, { segmentBytes: 2000 });
    void ledger.append({ sessionId: 'long', turnId: 'open-turn', type: 'turn_started' });
    for (let i = 0; i < 60; i++) void ledger.append({ sessionId: `s${i % 4}`, turnId: `t${i % 4}`, type: 'say', text: `line ${i} ${'.'.repeat(40)}` });
    for (let i = 0; i < 4; i++) void ledger.append({ sessionId: `s${i}`, turnId: `t${i}`, type: 'status', status: 'completed' });
    void ledger.append({ sessionId: 'long', turnId: 'open-turn', type: 'tool_call', callId: 'c', name: 'n', args: null });
    await ledger.flush();
    const segments = ledger.segments();
    expect(segments.length).toBeGreaterThanOrEqual(3);
    let next = 1;
    for (const segment of segments) {
      expect(segment.path).toBe(`${file}.${segment.firstSeq}-${segment.lastSeq}`);
      expect(segment.firstSeq).toBe(next);
      expect(onDisk(segment.path).map((e) => e.seq)).toEqual(Array.from({ length: segment.lastSeq - segment.firstSeq + 1 }, (_, i) => segment.firstSeq + i));
      next = segment.lastSeq + 1;
    }
    expect(onDisk()[0]!.seq).toBe(next);
    const all = await ledger.entries();
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 66 }, (_, i) => i + 1));
    expect((await ledger.entries({ sessionId: 's1', turnId: 't1', limit: 15 })).map((e) => (e as { text: string }).text.split(' ')[1]))
      .toEqual(Array.from({ length: 15 }, (_, i) => `${i * 4 + 1}`));
    expect((await ledger.entries({ sessionId: 'long' })).map((e) => e.seq)).toEqual([1, 66]);
    await ledger.close();

    // The next open (here without the option: it reads the segments all the same) closes the turn
    // that began in the first segment and was left open.
    ledger = await openLedger();
    expect(ledger.repair.closedTurns).toBe(1);
    expect((await ledger.entries({ sessionId: 'long' })).map((e) => [e.seq, e.type])).toEqual([[1, 'turn_started'], [66, 'tool_call'], [67, 'tool_aborted'], [68, 'status']]);
    await ledger.close();
    ledger = await openLedger(file, { segmentBytes: 2000 });
    expect(ledger.repair.closedTurns).toBe(0);
    expect(ledger.segments().map((s) => s.path)).toEqual(segments.map((s) => s.path));
    expect((await ledger.entries()).slice(0, 66)).toEqual(all);
    expect(ledger.hasTurn('t3')).toBe(true);
    await expect(ledger.append({ sessionId: 's', turnId: 't3', type: 'turn_started' })).rejects.toThrow(/used once/);

    // Retention: the oldest segments go; entries then starts at the first kept seq.
    const removed = await ledger.removeSegments(segments[1]!.lastSeq);
    expect(removed.map((s) => s.path)).toEqual([segments[0]!.path, segments[1]!.path]);
    expect(existsSync(segments[0]!.path)).toBe(false);
    expect(ledger.segments()[0]!.firstSeq).toBe(segments[2]!.firstSeq);
    expect((await ledger.entries())[0]!.seq).toBe(segments[2]!.firstSeq);
    expect((await ledger.entries({ sessionId: 'long' })).map((e) => e.seq)).toEqual([66, 67, 68]);
    await expect(ledger.removeSegments(-1)).rejects.toThrow(RangeError);
    await expect(ledger.removeSegments('3' as never)).rejects.toThrow(TypeError);
    // After close, entries reads the files at their paths, across the segments kept.
    const before = await ledger.entries();
    await ledger.close();
    expect(await ledger.entries()).toEqual(before);
    await expect(ledger.removeSegments(Number.MAX_SAFE_INTEGER)).rejects.toThrow(/closed/);
  });

  it('every segment removed, then reopened: the next seal is named from the first seq the file being written holds', async () => {
    let ledger = await openLedger(file, { segmentBytes: 300 });
    await ledger.append({ sessionId: 'a', turnId: 't0', type: 'turn_started' });
    await ledger.append({ sessionId: 'a', turnId: 't0', type: 'say', text: 'x'.repeat(2000) });
    await ledger.append({ sessionId: 'a', turnId: 't0', type: 'say', text: 'x'.repeat(2000) });
    const segments = ledger.segments();
    await ledger.removeSegments(segments.at(-1)!.lastSeq); // the file being written now starts past 1
    const first = (await ledger.entries())[0]!.seq;
    expect(first).toBeGreaterThan(1);
    await ledger.close();
    ledger = await openLedger(file, { segmentBytes: 300 }); // its repair ends t0, and that line seals the file
    expect(ledger.repair.closedTurns).toBe(1);
    expect(ledger.segments()[0]!.firstSeq).toBe(first);
    await ledger.close();
    ledger = await openLedger(file, { segmentBytes: 300 }); // refused before: "starts at seq 3, but its name says … 1 to 3"
    expect((await ledger.entries()).map((e) => e.seq)[0]).toBe(first);
    await ledger.close();
  });

  it('repairs at open a turn whose start is in a sealed segment', async () => {
    const ledger = await Ledger.open(file, { segmentBytes: 300 });
    void ledger.append({ sessionId: 's', turnId: 'crashed', type: 'turn_started' });
    for (let i = 0; i < 10; i++) void ledger.append({ sessionId: 'o', turnId: `o${i}`, type: 'say', text: 'x'.repeat(50) });
    await ledger.flush();
    expect(ledger.segments().length).toBeGreaterThan(1);
    // The crash: the ledger is left as it is; its lock and handle go with a close that writes nothing more.
    await ledger.close();
    const reopened = await openLedger(file, { segmentBytes: 300 });
    expect(reopened.repair.closedTurns).toBe(11);
    const crashed = await reopened.entries({ sessionId: 's' });
    expect(crashed.map((e) => [e.type, (e as { status?: string }).status])).toEqual([['turn_started', undefined], ['status', 'interrupted']]);
  });

  it('reads whole and in order while segments are sealed under it (appends and reads interleaved)', async () => {
    const ledger = await openLedger(file, { segmentBytes: 500 });
    const checks: Promise<void>[] = [];
    for (let i = 0; i < 300; i++) {
      void ledger.append({ sessionId: `s${i % 3}`, turnId: `t${i % 3}`, type: 'say', text: `${i}` });
      if (i % 7 === 0) {
        const seq = ledgerHooks(ledger)!.seq;
        const session = `s${i % 3}`;
        checks.push(ledger.entries().then((all) => { expect(all.slice(0, seq).map((e) => e.seq)).toEqual(Array.from({ length: seq }, (_, k) => k + 1)); }));
        checks.push(ledger.entries({ sessionId: session }).then((mine) => {
          const expected = Array.from({ length: seq }, (_, k) => k + 1).filter((q) => (q - 1) % 3 === i % 3);
          expect(mine.map((e) => e.seq).slice(0, expected.length)).toEqual(expected);
        }));
      }
      if (i % 50 === 49) await ledger.flush();
    }
    await Promise.all(checks);
    expect(ledger.segments().length).toBeGreaterThan(10);
  });

  it('refuses a bad segmentBytes or closeWaitMs with the option named', async () => {
    await expect(Ledger.open(file, { segmentBytes: 0 })).rejects.toThrow(/options\.segmentBytes/);
    await expect(Ledger.open(file, { segmentBytes: '1' as never })).rejects.toThrow(TypeError);
    await expect(Ledger.open(file, { closeWaitMs: -1 })).rejects.toThrow(/options\.closeWaitMs/);
  });
});

describe('nothing of a turn after its end', () => {
  it('refuses an append for a turn whose terminal status is recorded, also after a reopen, and keeps the file as it was', async () => {
    let ledger = await openLedger();
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await ledger.append({ sessionId: 's', turnId: 't', type: 'status', status: 'completed' });
    await expect(ledger.append({ sessionId: 's', turnId: 't', type: 'say', text: 'late' })).rejects.toThrow(/turn "t" has ended/);
    await ledger.close();
    ledger = await openLedger();
    await expect(ledger.append({ sessionId: 's', turnId: 't', type: 'tool_output', callId: 'c', output: 1, success: true })).rejects.toThrow(/has ended/);
    await ledger.append({ sessionId: 's', turnId: 'u', type: 'turn_started' });
    expect(onDisk().map((e) => [e.seq, e.turnId])).toEqual([[1, 't'], [2, 't'], [3, 'u']]);
  });
});

describe('a sealed segment', () => {
  it('is refused, naming it and the line, when it holds a hole (it was synced whole: that is damage, not a power loss)', async () => {
    const ledger = await Ledger.open(file, { segmentBytes: 200 });
    for (let i = 0; i < 10; i++) void ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'say', text: 'x'.repeat(30) });
    await ledger.close();
    const sealed = ledger.segments()[0]!.path;
    const bytes = readFileSync(sealed);
    bytes.fill(0, 10, 40);
    writeFileSync(sealed, bytes);
    await expect(Ledger.open(file)).rejects.toThrow(/Ledger\.open: ".*history\.jsonl\.1-\d+" line 1 is not a valid ledger entry/);
  });
});

describe('a sealed segment that does not hold what its name says', () => {
  /** A closed ledger of seven sealed segments, each turn ended; returns the segments (3 seqs each: 1-3, 4-6, …). */
  async function sealedTurns(): Promise<{ path: string; firstSeq: number; lastSeq: number }[]> {
    const ledger = await Ledger.open(file, { segmentBytes: 200 });
    for (let i = 0; i < 12; i++) {
      void ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'turn_started' });
      void ledger.append({ sessionId: 's', turnId: `t${i}`, type: 'status', status: 'completed' });
    }
    await ledger.close();
    const segments = ledger.segments();
    expect(segments.slice(0, 2).map((s) => [s.firstSeq, s.lastSeq])).toEqual([[1, 3], [4, 6]]);
    return segments;
  }

  it('is refused at open when one in the middle is missing, naming the seqs and the files around the gap, and the files stay as they were', async () => {
    const segments = await sealedTurns();
    rmSync(segments[1]!.path);
    const before = readFileSync(file);
    // t1 began in 1-3 and ended in the missing 4-6: a repair would record a false `interrupted`, and t2 (5-6) could be used again.
    await expect(Ledger.open(file)).rejects.toThrow(/Ledger\.open: seqs 4 to 6 are missing between ".*history\.jsonl\.1-3" and ".*history\.jsonl\.7-9"/);
    expect(readFileSync(file)).toEqual(before);
  });

  it('is refused at open when the newest is missing (the file being written then starts after a gap)', async () => {
    const segments = await sealedTurns();
    const newest = segments.at(-1)!;
    rmSync(newest.path);
    await expect(Ledger.open(file)).rejects.toThrow(new RegExp(`seqs ${newest.firstSeq} to ${newest.lastSeq} are missing between ".*history\\.jsonl\\.\\d+-\\d+" and ".*history\\.jsonl"`));
  });

  it('is refused at open, naming it, when it was cut at a line boundary (it holds fewer seqs than its name says)', async () => {
    const segments = await sealedTurns();
    const lines = readFileSync(segments[1]!.path, 'utf8').split('\n').filter(Boolean);
    writeFileSync(segments[1]!.path, `${lines.slice(0, -1).join('\n')}\n`);
    await expect(Ledger.open(file)).rejects.toThrow(/Ledger\.open: ".*history\.jsonl\.4-6" ends at seq 5, but its name says it holds seqs 4 to 6/);
  });

  it('still opens when the oldest ones were removed by hand', async () => {
    const segments = await sealedTurns();
    rmSync(segments[0]!.path);
    rmSync(segments[1]!.path);
    const ledger = await openLedger();
    expect(ledger.segments()[0]!.firstSeq).toBe(7);
    expect(ledger.repair.closedTurns).toBe(0);
  });
});
