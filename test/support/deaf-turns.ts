/**
 * Turns whose tool ignores its signal until released, for the specs of a ledger's `close()` waiting
 * for the stops under way (the file ledger's and PgLedger's).
 */
import type { TurnRunner } from '../../dist/src/index.js';

/** `count` turns, each in a tool that ignores its signal until `release()`; resolves once all are in it. */
export async function deafTurns(runner: TurnRunner, count: number) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => { release = resolve; });
  let inside = 0;
  let allInside!: () => void;
  const everyToolRuns = new Promise<void>((resolve) => { allInside = resolve; });
  let signalledCount = 0;
  let allSignalled!: () => void;
  /** Resolves once every tool saw its signal: the stops' intent (`cancelling`) is recorded by then. */
  const signalled = new Promise<void>((resolve) => { allSignalled = resolve; });
  const outcomes = Array.from({ length: count }, (_, i) => runner.run(`s${i}`, async (turn) => {
    await turn.say(`working on ${i}`);
    return turn.tool('slow', { i }, async (token) => {
      token.signal.addEventListener('abort', () => { if (++signalledCount === count) allSignalled(); }, { once: true });
      if (++inside === count) allInside();
      await gate; // ignores its signal: the stop's grace runs out first
      return 'too late';
    });
  }, { turnId: `t${i}` }));
  await everyToolRuns;
  return { outcomes, release, signalled };
}
