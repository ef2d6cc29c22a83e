/**
 * The session index (docs/runner.md, "Reading one session reads one session"): `entries({ sessionId })`
 * parses that session's lines and no other's, reads nothing for an unknown session, and returns
 * exactly what a full scan filtered by session returns, for ledgers built at open and kept as it appends.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { Ledger, type LedgerEntry, type LedgerEntryInput } from '../dist/src/index.js';
import { fileHandlePrototype } from './support/file-handle.js';
import { dir, file, openLedger, useLedgerScratch } from './support/ledger-scratch.js';

useLedgerScratch('fullstop-ledger-index-');

/** The ledger lines JSON.parse is given while `fn` runs (other parses, of anything not a ledger line, are ignored). */
async function linesParsedDuring<T>(fn: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const real = JSON.parse;
  const spy = vi.spyOn(JSON, 'parse').mockImplementation(((text: string, reviver?: never) => {
    if (typeof text === 'string' && text.startsWith('{"seq":')) lines.push(text);
    return real(text, reviver);
  }) as typeof JSON.parse);
  try {
    return { result: await fn(), lines };
  } finally {
    spy.mockRestore();
  }
}

describe('entries({ sessionId }) through the index', () => {
  it('on a 20 MB ledger of 500 sessions, parses only that session\'s lines (written before open and after), same as a full scan', async () => {
    // Written directly (as a previous process would have), every turn finished, so open repairs nothing.
    const SESSIONS = 500;
    const padding = 'x'.repeat(150);
    const parts: string[] = [];
    let seq = 0;
    let bytes = 0;
    for (let turn = 0; bytes < 20 * 1024 * 1024; turn++) {
      const sessionId = `session-${turn % SESSIONS}`;
      const turnId = `turn-${turn}`;
      for (const body of [{ type: 'turn_started' }, { type: 'say', text: `${padding} ${turn}` }, { type: 'status', status: 'completed' }]) {
        const line = `${JSON.stringify({ seq: ++seq, at: 1, sessionId, turnId, ...body })}\n`;
        parts.push(line);
        bytes += line.length;
      }
    }
    writeFileSync(file, parts.join(''));
    const ledger = await openLedger();
    // Kept as it appends: a new turn of the session, interleaved with another session's.
    for (const sessionId of ['session-7', 'session-8', 'session-7']) {
      void ledger.append({ sessionId, turnId: `late-${seq++}`, type: 'turn_started' });
    }
    const full = await ledger.entries();
    const { result, lines } = await linesParsedDuring(() => ledger.entries({ sessionId: 'session-7' }));
    const expected = full.filter((e) => e.sessionId === 'session-7');
    expect(result).toEqual(expected);
    expect(expected.length).toBeGreaterThan(200);
    expect(lines.length).toBe(expected.length);
    expect(lines.every((l) => l.includes('"sessionId":"session-7"'))).toBe(true);
    // With a turn as well: still only that session's lines.
    const { result: one, lines: oneLines } = await linesParsedDuring(() => ledger.entries({ sessionId: 'session-7', turnId: 'turn-7' }));
    expect(one).toEqual(full.filter((e) => e.turnId === 'turn-7'));
    expect(oneLines.length).toBe(expected.length);
  });

  it('a page of a long session reads and parses the lines near it: after afterSeq, not the session again (a client following it); a first page, not the whole run', async () => {
    const ledger = await openLedger();
    // One session, 8 MB of says (no segments): a follower asks for what came after the last seq it has.
    const text = 'y'.repeat(2000);
    for (let i = 0; i < 4000; i++) void ledger.append({ sessionId: 'long', turnId: `t${i}`, type: i % 2 === 0 ? 'turn_started' : 'say', ...(i % 2 === 0 ? {} : { text }) } as LedgerEntryInput);
    await ledger.flush();
    const all = await ledger.entries({ sessionId: 'long' });
    const last = all.at(-1)!.seq;
    const { result, lines } = await linesParsedDuring(() => ledger.entries({ sessionId: 'long', afterSeq: last - 3 }));
    expect(result).toEqual(all.slice(-3));
    // At most the lines of one mark's span (64 KiB: ~32 of these lines) before them, not all 4,000.
    expect(lines.length).toBeLessThan(100);
    // A first page of three reads one slice of the session's 8 MB run of lines, not the run.
    const read = vi.spyOn(await fileHandlePrototype(), 'read');
    try {
      expect(await ledger.entries({ sessionId: 'long', limit: 3 })).toEqual(all.slice(0, 3));
      const bytes = read.mock.calls.reduce((n, call) => n + (typeof call[2] === 'number' ? call[2] : (call[0] as { length?: number })?.length ?? 0), 0);
      expect(bytes).toBeGreaterThan(0);
      expect(bytes).toBeLessThanOrEqual(1024 * 1024);
    } finally {
      read.mockRestore();
    }
    // Every afterSeq still gives exactly the lines after it.
    for (const after of [0, 1, 700, 1999, 2000, 3333, last - 1, last]) {
      expect(await ledger.entries({ sessionId: 'long', afterSeq: after })).toEqual(all.filter((e) => e.seq > after));
    }
  });

  it('reads nothing for an unknown session', async () => {
    const ledger = await openLedger();
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    const read = vi.spyOn(await fileHandlePrototype(), 'read');
    const { result, lines } = await linesParsedDuring(() => ledger.entries({ sessionId: 'nobody' }));
    expect(result).toEqual([]);
    expect(lines).toEqual([]);
    expect(read).not.toHaveBeenCalled();
  });

  it('after close, reads the file at the path, as before', async () => {
    const ledger = await openLedger();
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    await ledger.append({ sessionId: 'u', turnId: 'v', type: 'turn_started' });
    await ledger.close();
    expect((await ledger.entries({ sessionId: 's' })).map((e) => e.turnId)).toEqual(['t']);
  });

  it('equals a full scan filtered by session, for random ledgers with segments, retention and reopens (property)', async () => {
    const sessionIds = fc.constantFrom('a', 'b', 'c', 'ü-😀', 'd e', '"q"');
    const step = fc.oneof(
      fc.record({ kind: fc.constant('append' as const), sessionId: sessionIds, text: fc.string({ maxLength: 40 }), awaited: fc.boolean() }),
      // A long line now and then: ranges far apart, or too long to read together.
      fc.record({ kind: fc.constant('append' as const), sessionId: sessionIds, text: fc.constantFrom('20000', '600000'), awaited: fc.boolean() }),
      fc.record({ kind: fc.constant('reopen' as const) }),
      fc.record({ kind: fc.constant('retain' as const), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }),
      fc.record({ kind: fc.constant('read' as const), sessionId: sessionIds }),
    );
    let run = 0;
    await fc.assert(fc.asyncProperty(fc.array(step, { maxLength: 40 }), fc.constantFrom(undefined, 300, 2000, 50_000), async (steps, segmentBytes) => {
      const path = join(dir, `property-${run++}.jsonl`);
      const options = segmentBytes === undefined ? {} : { segmentBytes };
      let ledger = await Ledger.open(path, options);
      try {
        let turns = 0;
        const check = async (sessionId: string) => {
          const full = await ledger.entries();
          const mine = await ledger.entries({ sessionId });
          expect(mine).toEqual(full.filter((e: LedgerEntry) => e.sessionId === sessionId));
          const after = full[Math.floor(full.length / 2)]?.seq ?? 0;
          expect(await ledger.entries({ sessionId, afterSeq: after })).toEqual(mine.filter((e: LedgerEntry) => e.seq > after));
        };
        for (const s of steps) {
          if (s.kind === 'append') {
            const entry: LedgerEntryInput = turns % 3 === 0
              ? { sessionId: s.sessionId, turnId: `t${turns}`, type: 'turn_started' }
              : { sessionId: s.sessionId, turnId: `t${turns - 1}`, type: 'say', text: /^\d+$/.test(s.text) ? 'x'.repeat(Number(s.text)) : s.text };
            turns += 1;
            const written = ledger.append(entry);
            if (s.awaited) await written;
          } else if (s.kind === 'reopen') {
            await ledger.close();
            ledger = await Ledger.open(path, options); // the index is rebuilt from the files (and the repair appended)
            turns = Math.ceil(turns / 3) * 3; // the repair ended every open turn: nothing more of them is appended
          } else if (s.kind === 'retain') {
            const segments = ledger.segments();
            if (segments.length > 0) await ledger.removeSegments(segments[Math.min(segments.length - 1, Math.floor(s.fraction * segments.length))]!.lastSeq);
          } else {
            await check(s.sessionId);
          }
        }
        for (const sessionId of ['a', 'b', 'c', 'ü-😀', 'd e', '"q"']) await check(sessionId);
      } finally {
        await ledger.close();
      }
    }), { numRuns: 60 });
  });
});
