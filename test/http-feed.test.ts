/**
 * The session feed's joins (src/http/session-feed.ts invariant 2): a stream that finishes
 * catching up just after the session wrote — when no stream was live to be woken — still gets
 * those entries, with no poll to rescue it (`pollMs: 0`, a store only this runner writes). And its
 * wakes (invariant 3): one that lands after a read's last look and before the read is marked done
 * (a runner event in the microtasks between) is not lost — on Deno the live end of a turn went
 * missing this way.
 */
import { describe, expect, it } from 'vitest';
import { TurnRegistry, TurnRunner, type LedgerFilter, type LedgerStore } from '../dist/src/index.js';
import { eventStream, streamStats } from '../dist/src/http/index.js';
import { Limiter, SessionFeed } from '../dist/src/http/session-feed.js';
import type { LedgerEntry } from '../dist/src/index.js';
import { eventually } from './support/leaks.js';
import { openLedger, useLedgerScratch } from './support/ledger-scratch.js';
import { SseReader } from './support/http.js';

useLedgerScratch('fullstop-http-feed-');

/** `store` whose next `entries` read is taken at once but answered only on `release()`. */
function heldRead(store: LedgerStore) {
  let release!: () => void;
  let taken!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  const read = new Promise<void>((r) => { taken = r; });
  let held = true;
  const wrapped: LedgerStore = {
    append: (e) => store.append(e), flush: () => store.flush(), hasTurn: (t) => store.hasTurn(t), close: () => store.close(),
    async entries(filter?: LedgerFilter) {
      const page = await store.entries(filter);
      if (!held) return page;
      held = false;
      taken();
      await gate;
      return page; // as it was before the release: the writes made meanwhile are not in it
    },
  };
  return { wrapped, read, release };
}

describe('a stream joining its session\'s feed', () => {
  it('gets the entries written while it was reading its history, though no poll runs', async () => {
    const registry = new TurnRegistry();
    const ledger = await openLedger();
    const runner = new TurnRunner({ registry, ledger });
    const { wrapped, read, release } = heldRead(ledger);
    const cut = new AbortController();
    const reader = new SseReader(eventStream(runner, new Request('http://x/events', { signal: cut.signal }), { sessionId: 's1', store: wrapped, pollMs: 0 }));
    await read; // its first read of the history has its snapshot (empty)
    expect((await runner.run('s1', async (turn) => { await turn.say('meanwhile'); }, { turnId: 't1' })).status).toBe('completed');
    release();
    await reader.until((e) => e.some((x) => x.event === 'status' && x.data.status === 'completed'), 5000, 'the turn written meanwhile');
    expect(reader.events.map((e) => e.event)).toEqual(['turn_started', 'say', 'status']);
    cut.abort();
    expect(streamStats(runner)).toMatchObject({ streams: 0, feeds: 0, timers: 0 });
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});

describe('live-only events', () => {
  it('a question reaches the live stream without an id, and its answer lets the turn go on', async () => {
    const registry = new TurnRegistry();
    const ledger = await openLedger();
    const runner = new TurnRunner({ registry, ledger });
    const cut = new AbortController();
    const reader = new SseReader(eventStream(runner, new Request('http://x/events', { signal: cut.signal }), { sessionId: 's1' }));
    await reader.until(() => streamStats(runner).feeds === 1 && streamStats(runner).streams === 1, 5000, 'the stream');
    const outcome = runner.run('s1', async (turn) => turn.ask('go on?'), { turnId: 't1' });
    await reader.until((e) => e.some((x) => x.event === 'question'), 5000, 'the question');
    const question = reader.events.find((x) => x.event === 'question')!;
    expect(question.id).toBeUndefined();
    expect(question.data).toMatchObject({ sessionId: 's1', turnId: 't1', question: 'go on?' });
    expect(runner.answer(question.data.questionId, 'yes')).toMatchObject({ outcome: 'accepted' });
    expect(await outcome).toMatchObject({ status: 'completed', value: 'yes' });
    await reader.until((e) => e.some((x) => x.event === 'status' && x.data.status === 'completed'), 5000, 'the end');
    cut.abort();
    expect(streamStats(runner)).toMatchObject({ streams: 0, feeds: 0, timers: 0 });
  });
});

describe('a feed\'s wakes', () => {
  it('a wake in the microtasks right after a read ends reads again: the entry it announced reaches the client', async () => {
    const entries: LedgerEntry[] = [{ seq: 1, at: 1, sessionId: 's', turnId: 't', type: 'turn_started' } as LedgerEntry];
    const store = {
      entries: async ({ afterSeq = 0 }: { afterSeq?: number }) => entries.filter((e) => e.seq > afterSeq),
    };
    const got: number[] = [];
    let feed!: SessionFeed;
    const client = {
      cursor: 0,
      entry(entry: LedgerEntry) {
        got.push(entry.seq);
        if (entry.seq === 1) {
          // Written now; its wake comes a microtask later, as a runner's event can.
          entries.push({ seq: 2, at: 2, sessionId: 's', turnId: 't', type: 'status', status: 'completed' } as LedgerEntry);
          queueMicrotask(() => feed.wake());
        }
      },
      live() {},
    };
    feed = new SessionFeed(store as never, 's', 0, new Limiter(1));
    feed.clients.add(client);
    expect(feed.goLive(client)).toBe(true);
    await eventually(() => got.length === 2, 2000, 'the second entry');
    expect(got).toEqual([1, 2]);
    feed.close();
  });
});
