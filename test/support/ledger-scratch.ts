/**
 * A ledger spec's scratch directory. `useLedgerScratch(prefix)`, called once at the top of a spec,
 * gives each test a fresh directory `dir` with `file` (history.jsonl) in it; `openLedger` opens a
 * Ledger there that is closed after the test (a close that fails then is not that test's check:
 * a spec that checks a close does it itself). After each test the mocks are restored and the
 * directory goes. `dir` and `file` are live bindings, set for each test: read them inside a test
 * or a hook, never at the top of the spec.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, vi } from 'vitest';
import { Ledger, type LedgerOpenOptions } from '../../dist/src/index.js';

/** This test's directory. */
export let dir: string;
/** `history.jsonl` in `dir`. */
export let file: string;
const opened: Ledger[] = [];

export function useLedgerScratch(prefix: string): void {
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
    file = join(dir, 'history.jsonl');
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await closeLedgers();
    rmSync(dir, { recursive: true, force: true });
  });
}

/** Closes every Ledger `openLedger` opened in this test (a hook that unmounts their disk calls it first). */
export async function closeLedgers(): Promise<void> {
  await Promise.all(opened.splice(0).map((ledger) => ledger.close().catch(() => {})));
}

/** Opens a Ledger (at `file` unless told), closed after the test. */
export async function openLedger(path = file, options?: LedgerOpenOptions): Promise<Ledger> {
  const ledger = await Ledger.open(path, options);
  opened.push(ledger);
  return ledger;
}

/**
 * With `useLedgerScratch`: one Ledger at `file` for each test, opened with `options` before it.
 * After it the test's spies are restored first (the close writes through the real methods), then
 * the ledger is closed, and a close that fails fails the test. Read `.ledger` inside a test.
 */
export function useLedgerEachTest(options?: LedgerOpenOptions): { readonly ledger: Ledger } {
  const current = {} as { ledger: Ledger };
  beforeEach(async () => {
    current.ledger = await openLedger(file, options);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await current.ledger.close();
  });
  return current;
}
