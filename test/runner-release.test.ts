/**
 * Once a stop has begun it wins, and once a turn has ended its session is free: a listener of a
 * terminal event may start the session's next turn, and an answer after Stop is refused.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CancelledError, TurnRegistry, TurnRunner, type TurnOutcome } from '../dist/src/index.js';

const registry = new TurnRegistry();
const runner = new TurnRunner({ registry, graceMs: 100 });

afterEach(() => {
  runner.removeAllListeners();
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

describe('a listener of a terminal event', () => {
  it.each(['turn_completed', 'turn_failed', 'turn_aborted'] as const)('of %s starts the session\'s next turn at once', async (event) => {
    let next: Promise<TurnOutcome<string>> | undefined;
    runner.once(event, (p) => { next = runner.run(p.sessionId, async () => 'next'); });
    let entered!: () => void;
    const inside = new Promise<void>((r) => { entered = r; });
    const first = runner.run('s', async (turn) => {
      entered();
      if (event === 'turn_failed') throw new Error('failed on purpose');
      if (event === 'turn_aborted') await new Promise((r) => turn.signal.addEventListener('abort', r));
      return 'first';
    });
    await inside;
    if (event === 'turn_aborted') await runner.stop('s');
    await first;
    expect(next).toBeDefined();
    expect(await next).toMatchObject({ status: 'completed', value: 'next' });
  });
});

describe('answer() once a stop has begun', () => {
  it('returns false, and the ask rejects with CancelledError', async () => {
    let questionId = '';
    const asked = new Promise<void>((r) => runner.once('question', (p) => { questionId = p.questionId; r(); }));
    let askEnded: unknown;
    const outcome = runner.run('s', async (turn) => {
      try {
        await turn.ask('proceed?');
        askEnded = 'answered';
      } catch (error) {
        askEnded = error;
      }
    });
    await asked;
    const stopping = runner.stop('s');
    expect(runner.answer(questionId, 'yes')).toEqual({ outcome: 'not_found', questionId });
    await stopping;
    expect((await outcome).status).toBe('cancelled');
    expect(askEnded).toBeInstanceOf(CancelledError);
  });

  it('before a stop, answers once', async () => {
    let questionId = '';
    const asked = new Promise<void>((r) => runner.once('question', (p) => { questionId = p.questionId; r(); }));
    const outcome = runner.run('s', (turn) => turn.ask('proceed?'));
    await asked;
    expect(runner.answer(questionId, 'yes')).toEqual({ outcome: 'accepted', questionId, node: 'local' });
    expect(runner.answer(questionId, 'again')).toEqual({ outcome: 'already_answered', questionId });
    expect(await outcome).toMatchObject({ status: 'completed', value: 'yes' });
  });
});
