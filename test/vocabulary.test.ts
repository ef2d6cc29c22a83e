/**
 * One word per situation (DESIGN §11.3): the same situations, met through a runner alone
 * (`runner.requestStop`, `runner.answer`) and through a fleet on Redis (`fleet.stop`,
 * `fleet.answer`, the turn run on another instance), answer the same outcome words with the same
 * facts: nothing to stop is `not_found`, a turn over is `already_finished` with its `status`, a stop
 * for a turn not started is `pending`, or `refused` (`why: 'session_full'`) when its session holds
 * as many as it may; an answer is `accepted` (with the node that took it), `already_answered`, or
 * `not_found`.
 */
import { describe, expect, it } from 'vitest';
import { TurnRegistry, TurnRunner, type Turn } from '../dist/src/index.js';
import { MAX_PENDING_STOPS_PER_SESSION } from '../dist/src/constants.js';
import { redisReachable, REDIS_PORT } from './fixtures/fleet/support.js';
import { redisScene } from './fixtures/fleet/backends.js';
import { eventually, held, type FleetScene } from './fixtures/fleet/scene.js';

/** What a situation needs of a side: run a turn, stop, answer; each answer as a plain object. */
interface Side {
  /** The runner the turns run on (its `question` events give the question ids). */
  runner: TurnRunner;
  /** The node an accepted answer names. */
  node: string;
  run(sessionId: string, turnId: string, body: (turn: Turn) => Promise<unknown>): Promise<{ status: string }>;
  stop(sessionId: string, options?: { turnId?: string; reason?: string }): Promise<Record<string, unknown>>;
  answer(questionId: string, answer: unknown): Promise<Record<string, unknown>>;
  /** Resolves once a question asked now can be answered (the fleet registers it in Redis after the event). */
  asked(questionId: string): Promise<void>;
}

/** A runner alone: `requestStop` and `answer` answered as they are (a report's promise awaited). */
function runnerSide(): Side {
  const runner = new TurnRunner({ registry: new TurnRegistry() });
  return {
    runner,
    node: 'local',
    run: (sessionId, turnId, body) => runner.run(sessionId, body, { turnId }),
    stop: async (sessionId, options) => ({ ...runner.requestStop(sessionId, options) }),
    answer: async (questionId, answer) => ({ ...runner.answer(questionId, answer) as object }),
    asked: async () => {},
  };
}

/** Turns run on instance A, stops and answers sent through instance B. */
async function fleetSide(scene: FleetScene): Promise<Side> {
  const a = await scene.instance('A');
  const b = await scene.instance('B');
  return {
    runner: a.runner,
    node: a.fleet.nodeId,
    run: (sessionId, turnId, body) => a.fleet.run(sessionId, body, { turnId }),
    stop: (sessionId, options) => b.fleet.stop(sessionId, options) as Promise<Record<string, unknown>>,
    answer: (questionId, answer) => b.fleet.answer(questionId, answer, { timeoutMs: 10_000 }) as Promise<Record<string, unknown>>,
    asked: (questionId) => eventually(async () => (await a.redis.keys(`${scene.prefix}:*${questionId}*:question`)).length === 1, 10_000, 'the question to be registered'),
  };
}

/** A turn id's outcome of a turn that ran to `status`, then a stop naming it. */
async function endedThen(side: Side, sessionId: string, turnId: string, status: 'completed' | 'failed' | 'cancelled'): Promise<Record<string, unknown>> {
  if (status === 'cancelled') {
    const h = held();
    const run = side.run(sessionId, turnId, h.body);
    await h.started;
    await side.stop(sessionId, { turnId });
    expect(await run).toMatchObject({ status: 'cancelled' });
  } else {
    expect(await side.run(sessionId, turnId, async () => { if (status === 'failed') throw new Error('boom'); return 1; })).toMatchObject({ status });
  }
  return side.stop(sessionId, { turnId });
}

/** Each situation, and the answer both sides must give (the facts that matter; ids checked too). */
const stopSituations: Array<[string, (side: Side) => Promise<Record<string, unknown>>, Record<string, unknown>]> = [
  ['nothing runs in the session, a stop without a turn id', (side) => side.stop('idle'), { outcome: 'not_found', sessionId: 'idle' }],
  ['a turn that completed, stopped by its id', (side) => endedThen(side, 's-done', 't-done', 'completed'),
    { outcome: 'already_finished', sessionId: 's-done', turnId: 't-done', status: 'completed' }],
  ['a turn that failed, stopped by its id', (side) => endedThen(side, 's-failed', 't-failed', 'failed'),
    { outcome: 'already_finished', sessionId: 's-failed', turnId: 't-failed', status: 'failed' }],
  ['a turn that was stopped, stopped again by its id', (side) => endedThen(side, 's-stopped', 't-stopped', 'cancelled'),
    { outcome: 'already_finished', sessionId: 's-stopped', turnId: 't-stopped', status: 'cancelled' }],
  ['a turn id nobody has started', (side) => side.stop('s-early', { turnId: 't-early' }), { outcome: 'pending', sessionId: 's-early', turnId: 't-early' }],
  ['a turn id nobody has started, its session holding as many kept stops as it may', async (side) => {
    for (let i = 0; i < MAX_PENDING_STOPS_PER_SESSION; i++) expect(await side.stop('s-full', { turnId: `t-kept-${i}` })).toMatchObject({ outcome: 'pending' });
    return side.stop('s-full', { turnId: 't-one-too-many', reason: 'cancel.user' });
  }, { outcome: 'refused', sessionId: 's-full', turnId: 't-one-too-many', reason: 'cancel.user', why: 'session_full' }],
];

/** A turn that asks two questions, answered through `side`: the replies in order. */
async function answers(side: Side): Promise<Record<string, unknown>[]> {
  const ids: string[] = [];
  const waiters: Array<(id: string) => void> = [];
  side.runner.on('question', ({ questionId }: { questionId: string }) => { ids.push(questionId); waiters.shift()?.(questionId); });
  const next = () => new Promise<string>((resolve) => { waiters.push(resolve); });
  const first$ = next();
  const second$ = next();
  const run = side.run('s-ask', 't-ask', async (turn) => [await turn.ask('colour?'), await turn.ask('size?')]);
  const replies: Record<string, unknown>[] = [];
  const first = await first$;
  await side.asked(first);
  replies.push(await side.answer(first, 'blue'));
  const second = await second$;
  await side.asked(second);
  replies.push(await side.answer(first, 'red')); // the first again, while its turn still runs
  replies.push(await side.answer('q-never-asked', 'x'));
  replies.push(await side.answer(second, 'big'));
  expect(await run).toMatchObject({ status: 'completed', value: ['blue', 'big'] });
  // A question its turn stopped waiting for is withdrawn.
  let withdrawn!: string;
  // Announced first (with a fleet the event waits for the question's record), then left unanswered.
  const announced = new Promise<void>((resolve) => side.runner.once('question', ({ questionId }: { questionId: string }) => { withdrawn = questionId; resolve(); }));
  expect(await side.run('s-ask', 't-withdrawn', async (turn) => { void turn.ask('never mind'); await announced; return 1; })).toMatchObject({ status: 'completed' });
  replies.push(await side.answer(withdrawn, 'late'));
  return replies.map((r) => ({ ...r, questionId: r.questionId === first ? 'first' : r.questionId === second ? 'second' : r.questionId === withdrawn ? 'withdrawn' : r.questionId }));
}

const expectedAnswers = (node: string) => [
  { outcome: 'accepted', questionId: 'first', node },
  { outcome: 'already_answered', questionId: 'first' },
  { outcome: 'not_found', questionId: 'q-never-asked' },
  { outcome: 'accepted', questionId: 'second', node },
  { outcome: 'not_found', questionId: 'withdrawn' },
];

const redisUp = await redisReachable();
if (!redisUp) console.warn(`vocabulary.test.ts skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT})`);

describe.skipIf(!redisUp)('one vocabulary: the runner and the fleet say the same of the same situation', () => {
  const current = redisScene();

  describe.each(stopSituations)('a stop: %s', (_, situation, expected) => {
    it('the runner alone and the fleet answer alike', async () => {
      const alone = runnerSide();
      const fleet = await fleetSide(current.scene);
      const fromRunner = await situation(alone);
      const fromFleet = await situation(fleet);
      expect(fromRunner).toMatchObject(expected);
      expect(fromFleet).toMatchObject(expected);
      expect(fromRunner.outcome).toBe(fromFleet.outcome);
      expect(alone.runner.registry.stats()).toMatchObject({ liveTokens: 0 });
    });
  });

  it('an answer: accepted (naming the node that took it), already_answered, not_found, alike', async () => {
    const alone = runnerSide();
    const fleet = await fleetSide(current.scene);
    expect(await answers(alone)).toEqual(expectedAnswers('local'));
    expect(await answers(fleet)).toEqual(expectedAnswers(fleet.node));
  });

  it('runner.answer on a fleet\'s runner names the fleet\'s node', async () => {
    const a = await current.scene.instance('A');
    const asked = new Promise<string>((resolve) => a.runner.once('question', ({ questionId }: { questionId: string }) => resolve(questionId)));
    const run = a.runner.run('s-local', async (turn) => turn.ask('here?'));
    const questionId = await asked;
    expect(a.runner.answer(questionId, 'yes')).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
    expect(await run).toMatchObject({ status: 'completed', value: 'yes' });
  });
});
