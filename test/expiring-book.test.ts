/**
 * The one book of values kept for a fixed time (src/base/expiring-book.ts), behind the runner's
 * pending stops and the example server's kept stops.
 */
import { describe, expect, it, vi } from 'vitest';
import { ExpiringBook } from '../src/base/expiring-book.js';

describe('ExpiringBook', () => {
  it('keeps the first value of a (group, id), counts per group, and takes it once', () => {
    const book = new ExpiringBook<string>(60_000);
    expect(book.add('s1', 't1', 'first').value).toBe('first');
    expect(book.add('s1', 't1', 'second').value).toBe('first'); // a repeat keeps the first
    book.add('s1', 't2', 'x');
    book.add('s2', 't1', 'y');
    expect([book.size, book.groups, book.held('s1'), book.held('s2'), book.held('s3')]).toEqual([3, 2, 2, 1, 0]);
    expect(book.get('s1', 't2')?.value).toBe('x');
    expect(book.take('s1', 't1')?.value).toBe('first');
    expect(book.take('s1', 't1')).toBeUndefined();
    expect(book.take('s2', 't1')?.value).toBe('y');
    expect([book.size, book.groups]).toEqual([1, 1]); // the group went with its last value
  });

  it('forgets a value at its expiry, on the monotonic clock, and reports expiresAt in epoch ms', () => {
    let now = 1_000;
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    try {
      const book = new ExpiringBook<number>(100);
      const kept = book.add('s', 'a', 1);
      expect(Math.abs(kept.expiresAt - (Date.now() + 100))).toBeLessThan(60_000);
      now += 50;
      book.add('s', 'b', 2);
      now += 50; // a's deadline
      expect(book.get('s', 'a')).toBeUndefined();
      expect(book.size).toBe(1);
      now += 50;
      expect([book.size, book.groups, book.held('s')]).toEqual([0, 0, 0]);
    } finally {
      clock.mockRestore();
    }
  });

  it('a take in the middle of the list unlinks in place: the others still expire in order', () => {
    let now = 0;
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    try {
      const book = new ExpiringBook<number>(10);
      for (let i = 0; i < 5; i++) { book.add('s', `t${i}`, i); now += 1; }
      expect(book.take('s', 't2')?.value).toBe(2);
      now = 11; // t0 (deadline 10) and t1 (11) gone
      expect(book.size).toBe(2);
      expect(book.get('s', 't3')?.value).toBe(3);
    } finally {
      clock.mockRestore();
    }
  });
});
