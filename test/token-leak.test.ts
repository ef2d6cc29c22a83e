/**
 * 100k begin/end cycles leave nothing behind: `stats()` back to zero and, after a full GC, the heap
 * grown by less than 16 bytes per turn (docs/design.md §1 invariant 5). Every turn has a session id
 * never used before: with a handful of ids reused in turn, anything kept per session id (a map
 * entry never deleted) would stay a handful of entries and no heap bound could see it; with fresh
 * ids it grows with every turn (keeping each retired token costs about 300 bytes a turn).
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

interface Report {
  mode: string;
  cycles: number;
  ms: number;
  stats: { liveTokens: number; liveSlots: number; liveBridges: number; liveOwners: number };
  heapGrowth: number;
  arrayBufferGrowth: number;
}

/** Bytes of heap growth allowed per turn; the library keeps nothing per finished turn. */
const BYTES_PER_TURN = 16;

async function cycles(mode: 'plain' | 'full', count: number): Promise<Report> {
  const { stdout } = await run(process.execPath, ['--expose-gc', fixture, mode, String(count), 'fresh'], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
}

describe('100k begin/end cycles, each on a fresh session id', () => {
  const kinds = [
    ['plain', 'of plain turns return stats() to zero and grow the heap by less than 16 bytes a turn after GC'],
    ['full', 'with signal listeners, children, exported handles (bridges) and cancels leave nothing behind either'],
  ] as const;
  for (const [kind, title] of kinds) {
    it(title, async () => {
      const report = await cycles(kind, 100_000);
      expect(report.cycles).toBe(100_000);
      expect(report.stats).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
      expect(report.heapGrowth / report.cycles).toBeLessThan(BYTES_PER_TURN);
      // Freed cells are reused: no slab (SharedArrayBuffer) is added after the warm-up.
      expect(report.arrayBufferGrowth).toBeLessThan(64 * 1024);
      expect(liveDescendants()).toEqual([]);
    });
  }
});
