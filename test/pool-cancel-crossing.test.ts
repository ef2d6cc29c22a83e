/**
 * A stopped task's error is a CancelledError whatever the worker's errors look like: structured
 * cloning keeps neither a CancelledError's class, name nor code (on any runtime), only its message
 * and stack, so the stack's first line is the mark that crosses. Bun gives an error made with no
 * stack frames no stack at all (docs/runtimes.md); on Node a host's `Error.prepareStackTrace`
 * that returns nothing does the same, which is how this runs here.
 */
import { afterAll, afterEach, expect, it } from 'vitest';
import { CancelledError, isCancelledError, TurnPool, TurnRegistry } from '../dist/src/index.js';
import { flags, started } from './support/handshake.js';

const registry = new TurnRegistry();
const pool = new TurnPool({ filename: new URL('./fixtures/pool/tasks.mjs', import.meta.url).href, minThreads: 1, maxThreads: 1, graceMs: 10_000 });

afterEach(() => {
  registry.endTurn('s');
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});
afterAll(() => pool.destroy());

it('a cooperative stop on a worker whose errors have no stack rejects with a CancelledError', async () => {
  const token = registry.beginTurn('s');
  const f = flags();
  const running = pool.run({ flags: f }, { token, name: 'pollsWithoutStacks' });
  await started(f);
  token.cancel('cancel.user');
  const error = await running.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(CancelledError);
  expect(isCancelledError(error)).toBe(true);
  expect(error).toMatchObject({ hard: false, reason: 'cancel.user' });
  expect(pool.stats()).toMatchObject({ cooperativeStops: 1, hardStops: 0 });
});
