/**
 * The one head-and-tail rule (src/base/head-tail.ts): exec's `maxBuffer`, the history's
 * `maxOutputBytes` and `toModelMessages`' budget split a byte budget the same way, and cut text
 * has the one shape `head\n… N bytes omitted …\ntail`.
 */
import { describe, expect, it } from 'vitest';
import { exec } from '../dist/src/index.js';
import { cutText, headAndTail, splitBudget } from '../src/base/head-tail.js';

describe('one head-and-tail rule', () => {
  it('an odd budget gives its odd byte to the head, in exec and in the history alike', async () => {
    const r = await exec('printf', ['0123456789'], { maxBuffer: 5 });
    expect(r.stdout).toBe(headAndTail('0123456789', 5));
    expect(r.stdout).toBe('012\n… 5 bytes omitted …\n89');
    expect(r.omittedBytes.stdout).toBe(cutText('0123456789', 5).omittedBytes);
    expect(splitBudget(5)).toEqual({ head: 3, tail: 2 });
  });

  it('multi-byte text: exec and the history keep the same characters, in bytes', async () => {
    const text = 'é'.repeat(10); // 2 bytes each
    const r = await exec('printf', [text], { maxBuffer: 9 });
    expect(r.stdout).toBe(headAndTail(text, 9));
    expect(r.stdout).toBe('éé\n… 12 bytes omitted …\néé');
  });
});

describe('HeadTailKeeper: the one streaming head and tail (exec streams, call progress)', () => {
  it('a text within both caps is kept whole, even where the head had to stop short of a character', async () => {
    // head cap 4: 'ab' then 😀 (4 bytes) does not fit; the tail takes the 2 bytes the head left.
    const r = await exec('printf', ['ab😀cd'], { maxBuffer: 8 });
    expect(r.stdout).toBe('ab😀cd');
    expect(r.omittedBytes.stdout).toBe(0);
  });

  it('pieces arriving one at a time keep the same head and tail as one piece, and count every byte', async () => {
    const { HeadTailKeeper } = await import('../src/base/head-tail-keeper.js');
    const text = Array.from({ length: 5000 }, (_, i) => `${i}€\n`).join('');
    const whole = new HeadTailKeeper(100, 300);
    whole.add(text);
    const relayed = new HeadTailKeeper(100, 300);
    for (const ch of text) relayed.add(ch);
    expect(relayed.kept()).toEqual(whole.kept());
    const { head, tail, omittedBytes } = whole.kept();
    expect(Buffer.byteLength(head) + omittedBytes + Buffer.byteLength(tail)).toBe(Buffer.byteLength(text));
    expect(text.startsWith(head) && text.endsWith(tail)).toBe(true);
    expect(Buffer.byteLength(tail)).toBeGreaterThan(296);
  });
});
