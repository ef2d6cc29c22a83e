/**
 * 100k begin/end cycles leave nothing behind: `stats()` back to zero and the heap within 8 MiB of
 * where it started, after a full GC (docs/design.md §1 invariant 5).
 *
 * How GC is forced: the cycles run in a child `node --expose-gc` process (the fixture
 * `begin-end-cycles.mjs`, importing dist/ like any user) that prints its measurements as one JSON
 * line. This is more robust than `v8.setFlagsFromString('--expose-gc')` inside the vitest fork:
 * setting V8 flags after start-up is documented as unsupported, and the fork's heap also holds
 * vitest's own state and whatever other tests of the fork allocated, which would blur a
 * megabyte-scale bound. The child's heap holds only the library and the loop.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { liveDescendants } from './support/leaks.js';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/token/begin-end-cycles.mjs', import.meta.url));
const MiB = 1024 * 1024;

interface Report {
  mode: string;
  cycles: number;
  ms: number;
  stats: { liveTokens: number; liveSlots: number; liveBridges: number; liveOwners: number };
  heapGrowth: number;
  arrayBufferGrowth: number;
}

async function cycles(mode: 'plain' | 'full', count: number): Promise<Report> {
  const { stdout } = await run(process.execPath, ['--expose-gc', fixture, mode, String(count)], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
}

describe('100k begin/end cycles', () => {
  const kinds = [
    ['plain', 'of plain turns return stats() to zero and grow the heap by less than 8 MiB after GC'],
    ['full', 'with signal listeners, children, exported handles (bridges) and cancels leave nothing behind either'],
  ] as const;
  for (const [kind, title] of kinds) {
    it(title, async () => {
      const report = await cycles(kind, 100_000);
      expect(report.cycles).toBe(100_000);
      expect(report.stats).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
      expect(report.heapGrowth).toBeLessThan(8 * MiB);
      // Freed cells are reused: no slab (SharedArrayBuffer) is added after the warm-up.
      expect(report.arrayBufferGrowth).toBeLessThan(64 * 1024);
      expect(liveDescendants()).toEqual([]);
    });
  }
});
