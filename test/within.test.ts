/**
 * The one timeout helper (src/base/within.ts): the first outcome wins, and no timer outlives it.
 */
import { describe, expect, it } from 'vitest';
import { waitAtMost, within } from '../src/base/within.js';

/** Timers the process holds now (Node's active resources of type Timeout). */
const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('within: one bound, no leaked timer', () => {
  it('gives the promise’s value when it settles first, and clears its timer at once', async () => {
    const before = timers();
    let release!: (v: string) => void;
    const result = within(new Promise<string>((r) => { release = r; }), 600_000, () => 'late');
    expect(timers()).toBe(before + 1);
    release('value');
    await expect(result).resolves.toBe('value');
    expect(timers()).toBe(before); // a 10-minute bound does not hold the loop once the outcome is known
  });

  it('passes a rejection through, and clears its timer', async () => {
    const before = timers();
    await expect(within(Promise.reject(new Error('boom')), 600_000, () => 'late')).rejects.toThrow('boom');
    expect(timers()).toBe(before);
  });

  it('gives onTimeout’s value (or its throw) when the bound passes first; onTimeout runs once, never after', async () => {
    let calls = 0;
    const never = new Promise<string>(() => {});
    await expect(within(never, 1, () => { calls++; return 'late'; })).resolves.toBe('late');
    await expect(within(never, 1, () => { throw new RangeError('too late'); })).rejects.toThrow(RangeError);
    let release!: (v: string) => void;
    const racing = within(new Promise<string>((r) => { release = r; }), 1, () => { calls++; return 'late'; });
    await expect(racing).resolves.toBe('late');
    release('value'); // after the bound: ignored
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(2);
  });

  it('waitAtMost never rejects and leaves no timer', async () => {
    const before = timers();
    await expect(waitAtMost(Promise.reject(new Error('x')), 600_000)).resolves.toBeUndefined();
    await expect(waitAtMost(new Promise(() => {}), 1)).resolves.toBeUndefined();
    expect(timers()).toBe(before);
  });
});
