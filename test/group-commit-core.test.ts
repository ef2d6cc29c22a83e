/**
 * The group-commit core both ledgers share (src/ledger/group-commit-core.ts): flushes wait by seq
 * for the items admitted before them, reject with their own first failure, and are answered in
 * target order, the resolved ones through the store's `release`.
 */
import { describe, expect, it } from 'vitest';
import { FlushQueue } from '../dist/src/ledger/group-commit-core.js';

/** A flush's outcome so far: `pending` until it settles. */
function track(flush: Promise<void>): { outcome: unknown } {
  const state: { outcome: unknown } = { outcome: 'pending' };
  flush.then(() => { state.outcome = 'resolved'; }, (error: unknown) => { state.outcome = error; });
  return state;
}

/** Lets the promise reactions queued so far run. */
const settledReactions = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('FlushQueue', () => {
  it('a flush with nothing unsettled up to the last seq admitted resolves at once', async () => {
    const flushes = new FlushQueue(3);
    await expect(flushes.wait(4)).resolves.toBeUndefined();
    flushes.admit(4);
    await expect(flushes.wait(5)).resolves.toBeUndefined();
    expect(flushes.target).toBe(-Infinity);
  });

  it('a flush waits until every item up to its target settled, not for items admitted after it', async () => {
    const flushes = new FlushQueue(0);
    flushes.admit(1);
    flushes.admit(2);
    const first = track(flushes.wait(1));
    flushes.admit(3);
    const second = track(flushes.wait(1));
    expect(flushes.target).toBe(3);
    flushes.settle(2); // item 1 settled, item 2 not yet
    await settledReactions();
    expect([first.outcome, second.outcome]).toEqual(['pending', 'pending']);
    flushes.settle(3); // items 1 and 2: the first flush's; item 3 still holds the second
    await settledReactions();
    expect([first.outcome, second.outcome]).toEqual(['resolved', 'pending']);
    flushes.settle(Infinity);
    await settledReactions();
    expect(second.outcome).toBe('resolved');
    expect(flushes.target).toBe(-Infinity);
  });

  it('a flush rejects with the first failure among its items, once they all settled; a later item\'s failure is not its own', async () => {
    const flushes = new FlushQueue(0);
    for (const seq of [1, 2]) flushes.admit(seq);
    const early = track(flushes.wait(1));
    for (const seq of [3, 4]) flushes.admit(seq);
    const late = track(flushes.wait(1));
    const first = new Error('item 3 failed');
    flushes.fail(3, first);
    flushes.fail(2, new Error('item 2 failed'));
    flushes.fail(4, new Error('item 4 failed'));
    flushes.settle(4); // item 4 not settled: the late flush waits although it has failed
    await settledReactions();
    expect((early.outcome as Error).message).toBe('item 2 failed');
    expect(late.outcome).toBe('pending');
    flushes.settle(5);
    await settledReactions();
    expect(late.outcome).toBe(first);
  });

  it('settled flushes are answered in target order, the resolved ones through release first', async () => {
    const order: string[] = [];
    const flushes = new FlushQueue(0, (resolved) => {
      order.push(`release ${resolved.length}`);
      for (const waiter of resolved) waiter.resolve();
    });
    const outcomes: Promise<void>[] = [];
    for (let seq = 1; seq <= 3; seq++) {
      flushes.admit(seq);
      const flush = flushes.wait(1);
      outcomes.push(flush.then(() => { order.push(`resolved ${seq}`); }, () => { order.push(`rejected ${seq}`); }));
    }
    flushes.fail(3, new Error('item 3 failed'));
    flushes.settle(Infinity);
    await Promise.all(outcomes);
    expect(order).toEqual(['release 2', 'resolved 1', 'resolved 2', 'rejected 3']);
  });
});
