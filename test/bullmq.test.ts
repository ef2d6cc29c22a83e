/**
 * `fullstop/bullmq` against real BullMQ 6 on the shared Redis (node-redis serving both BullMQ and
 * the fleet): one turn per attempt, BullMQ's own cancel stops the turn with `cancel.user`, a
 * shutdown stop sends the job back to wait, a waiting or delayed job stopped never runs its body,
 * progress reaches `job.progress`, and `stopJob` reaches a running job here or through a fleet.
 * Each test has a key prefix of its own, obliterates its queue and leaves no key, token or child.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Queue, Worker, type Job, type Processor } from 'bullmq';
import { exec, Ledger, StopReasons, TurnRegistry, TurnRunner, type Turn } from '../dist/src/index.js';
import { Fleet } from '../dist/src/fleet/index.js';
import { JobStoppedError, requeueOnClose, stopJob, turnProcessor } from '../dist/src/bullmq/index.js';
import { client, dropKeys, keysUnder, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';
import { allGone, fixture, pidsIn } from './fixtures/exec/support.js';
import { toolTree } from './support/leaks.js';
import { eventually } from './fixtures/fleet/scene.js';

const up = await redisReachable();
if (!up) console.warn(`bullmq tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

const LIVENESS_MS = 10_000;

interface Scene {
  redis: Client; prefix: string; dir: string; ledger: Ledger; registry: TurnRegistry; runner: TurnRunner;
  queue: Queue; workers: Worker[]; fleets: Fleet[]; extraRunners: TurnRunner[];
}
let s: Scene;

beforeEach(async () => {
  if (!up) return;
  const redis = await client();
  const prefix = uniquePrefix();
  const dir = mkdtempSync(join(tmpdir(), 'fullstop-bullmq-'));
  const ledger = await Ledger.open(join(dir, 'history.jsonl'));
  const registry = new TurnRegistry();
  const runner = new TurnRunner({ ledger, registry, graceMs: 2000 });
  const queue = new Queue('jobs', { connection: redis, prefix });
  s = { redis, prefix, dir, ledger, registry, runner, queue, workers: [], fleets: [], extraRunners: [] };
});

afterEach(async () => {
  if (!up) return;
  for (const w of s.workers) await w.close(true);
  for (const f of s.fleets) await f.close();
  await dropKeys(s.redis, `${s.prefix}-fleet`); // the fleet keeps finished turns' records finishedTtlMs by design
  await s.queue.obliterate({ force: true });
  await s.queue.close();
  expect(await keysUnder(s.redis, s.prefix)).toEqual([]);
  expect(s.registry.stats()).toMatchObject({ liveTokens: 0 });
  await eventually(() => toolTree().length === 0, LIVENESS_MS, 'no child left');
  await s.ledger.close();
  await s.redis.quit();
  rmSync(s.dir, { recursive: true, force: true });
});

/** A worker of the scene's queue running `processor`; `started` resolves with each job as its body starts. */
// Processor<any, any>: a worker of the queue takes jobs of any data and result.
function worker(processor: Processor<any, any>, options: { autorun?: boolean } = {}): Worker {
  const w = new Worker('jobs', processor, { connection: s.redis, prefix: s.prefix, autorun: options.autorun ?? true, stalledInterval: 60_000 });
  w.on('error', () => {});
  s.workers.push(w);
  return w;
}

/** A latch the body opens when it starts: resolves with the job and its turn. */
function bodyStarts(): { started: Promise<{ job: Job; turn: Turn }>; open: (job: Job, turn: Turn) => void } {
  let open!: (job: Job, turn: Turn) => void;
  const started = new Promise<{ job: Job; turn: Turn }>((resolve) => { open = (job, turn) => resolve({ job, turn }); });
  return { started, open };
}

/** The job's settled state, once BullMQ has one (completed or failed). */
async function finished(jobId: string): Promise<Job> {
  await eventually(async () => {
    const state = await s.queue.getJobState(jobId);
    return state === 'completed' || state === 'failed';
  }, LIVENESS_MS, `job ${jobId} finished`);
  return (await s.queue.getJob(jobId))!; // read after: a job read before its end has no return value yet
}

async function entries(sessionId: string) {
  return s.ledger.entries({ sessionId });
}

describe.skipIf(!up)('fullstop/bullmq: a BullMQ job is a turn', () => {
  it('worker.cancelJob stops the turn with cancel.user: its exec child is gone, the history has the marker, the job fails without retry', async () => {
    const latch = bodyStarts();
    const ready = join(s.dir, 'ready');
    const w = worker(turnProcessor({ runner: s.runner }, async (job, turn) => {
      latch.open(job, turn);
      const result = await turn.tool('sh', {}, (token) => exec('sh', [fixture('exits-on-term.sh'), ready], { token }));
      return result.exitCode;
    }));
    const added = await s.queue.add('agent', { sessionId: 'chat-1' }, { attempts: 3 });
    const { turn } = await latch.started;
    const pids = await pidsIn(ready);
    expect(w.cancelJob(added.id!, 'user pressed stop')).toBe(true);
    const job = await finished(added.id!);
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1); // three attempts allowed, none taken after the stop
    expect(job.failedReason).toMatch(/stopped \(reason cancel\.user\)/);
    expect(allGone(pids)).toBe(true);
    const history = await entries('chat-1');
    expect(history.find((e) => e.type === 'turn_aborted')).toMatchObject({ turnId: turn.turnId, reason: StopReasons.user });
    expect(history.find((e) => e.type === 'tool_aborted')).toBeDefined();
    expect(history.at(-1)).toMatchObject({ type: 'status', status: 'cancelled', reason: StopReasons.user });
    // BullMQ's text is the stop's detail, never its reason.
    expect(history.find((e) => e.type === 'status' && (e as { status?: string }).status === 'cancelling')).toMatchObject({ reason: StopReasons.user, detail: 'user pressed stop' });
  });

  it('a failed attempt is retried as a new turn (never TurnIdUsedError); the last value is the job\'s return value', async () => {
    const turnIds: string[] = [];
    worker(turnProcessor({ runner: s.runner }, async (_job, turn) => {
      turnIds.push(turn.turnId);
      if (turnIds.length === 1) throw new Error('flaky model');
      return { answer: 42 };
    }));
    const added = await s.queue.add('agent', {}, { attempts: 2 });
    const job = await finished(added.id!);
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toEqual({ answer: 42 });
    expect(new Set(turnIds).size).toBe(2);
    // Session: the job id (no sessionId in the data). Two turns: failed, then completed.
    const statuses = (await entries(added.id!)).filter((e) => e.type === 'status').map((e) => [e.turnId, (e as { status?: string }).status]);
    expect(statuses).toEqual([[turnIds[0], 'failed'], [turnIds[1], 'completed']]);
  });

  it('runner.shutdown() during a job sends it back to wait (no attempt counted); another worker then runs it to completion', async () => {
    const latch = bodyStarts();
    const w = worker(turnProcessor({ runner: s.runner }, async (job, turn) => {
      latch.open(job, turn);
      await new Promise((_, reject) => turn.signal.addEventListener('abort', () => reject(turn.signal.reason), { once: true }));
      return 'never';
    }));
    const added = await s.queue.add('agent', {}, { attempts: 1 }); // one attempt: a failure would be for good
    const first = await latch.started;
    await Promise.all([s.runner.shutdown({ deadlineMs: LIVENESS_MS }), w.close()]);
    const waiting = (await s.queue.getJob(added.id!))!;
    expect(await waiting.getState()).toBe('waiting');
    expect(waiting.attemptsMade).toBe(0);
    expect((await entries(added.id!)).find((e) => e.type === 'turn_aborted')).toMatchObject({ turnId: first.turn.turnId, reason: StopReasons.shutdown });
    // A deploy's next instance takes it: a new turn id, and it completes.
    const next = new TurnRunner({ ledger: s.ledger, registry: s.registry });
    const second: string[] = [];
    worker(turnProcessor({ runner: next }, async (_job, turn) => { second.push(turn.turnId); return 'done'; }));
    const job = await finished(added.id!);
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toBe('done');
    expect(second).toHaveLength(1);
    expect(second[0]).not.toBe(first.turn.turnId);
  });

  it('with requeueOnClose, worker.close() during a job stops its turn (cancel.shutdown) and sends the job back to wait; the runner goes on', async () => {
    const latch = bodyStarts();
    const w = worker(turnProcessor({ runner: s.runner }, async (job, turn) => {
      latch.open(job, turn);
      await new Promise((_, reject) => turn.signal.addEventListener('abort', () => reject(turn.signal.reason), { once: true }));
      return 'never';
    }));
    requeueOnClose(w);
    const added = await s.queue.add('agent', {}, { attempts: 1 });
    const first = await latch.started;
    await w.close(); // resolves once the job has gone back
    const waiting = (await s.queue.getJob(added.id!))!;
    expect([await waiting.getState(), waiting.attemptsMade]).toEqual(['waiting', 0]);
    expect((await entries(added.id!)).find((e) => e.type === 'turn_aborted')).toMatchObject({ turnId: first.turn.turnId, reason: StopReasons.shutdown });
    worker(turnProcessor({ runner: s.runner }, async () => 'done')); // the same runner: it was not shut down
    const job = await finished(added.id!);
    expect([await job.getState(), job.returnvalue]).toEqual(['completed', 'done']);
  });

  it('a waiting job and a delayed job that stopJob stopped never run their body: each fails as stopped, without retry', async () => {
    const waiting = await s.queue.add('agent', { sessionId: 'w' }, { attempts: 3 });
    const delayed = await s.queue.add('agent', { sessionId: 'd' }, { attempts: 3, delay: 60_000 });
    expect(await stopJob(s.queue, waiting.id!)).toMatchObject({ outcome: 'pending', jobId: waiting.id, sessionId: 'w', state: 'waiting' });
    expect(await stopJob(s.queue, delayed.id!)).toMatchObject({ outcome: 'pending', jobId: delayed.id, sessionId: 'd', state: 'delayed' });
    let ran = 0;
    worker(turnProcessor({ runner: s.runner }, async () => { ran++; return 'ran'; }));
    for (const id of [waiting.id!, delayed.id!]) {
      const job = await finished(id); // the delayed one was promoted: it ends now, not in a minute
      expect(await job.getState()).toBe('failed');
      expect(job.attemptsMade).toBe(1);
      expect(job.failedReason).toMatch(/stopped before it ran \(reason cancel\.user\)/);
    }
    expect(ran).toBe(0);
    expect(await entries('w')).toEqual([]); // no turn began
    expect(await stopJob(s.queue, waiting.id!)).toMatchObject({ outcome: 'already_finished', status: 'failed' });
    expect(await stopJob(s.queue, 'no-such-job')).toEqual({ outcome: 'not_found', jobId: 'no-such-job' });
    // The stop of a job not started lives in its data: data that is not an object cannot hold it.
    const text = await s.queue.add('agent', 'just a prompt' as never, { delay: 60_000 });
    expect(await stopJob(s.queue, text.id!)).toEqual({ outcome: 'refused', jobId: text.id, why: 'data_not_object' });
    expect(await text.getState()).toBe('delayed');
  });

  it('turn.say and call.progress reach job.progress, throttled, the text bounded', async () => {
    const latch = bodyStarts();
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    worker(turnProcessor({ runner: s.runner, progress: { intervalMs: 50, maxBytes: 256 } }, async (job, turn) => {
      await turn.say('reading the repository');
      await turn.tool('build', {}, async (_token, call) => {
        for (let i = 0; i < 1000; i++) call.progress(`line ${i} ${'x'.repeat(100)}\n`);
        latch.open(job, turn);
        await released;
        return 'built';
      });
      return 'ok';
    }));
    const added = await s.queue.add('agent', {});
    const { turn } = await latch.started;
    let progress: unknown;
    await eventually(async () => {
      progress = (await s.queue.getJob(added.id!))?.progress;
      return typeof progress === 'object' && progress !== null && (progress as { type?: string }).type === 'tool_progress'
        && (progress as { text: string }).text.includes('line 999');
    }, LIVENESS_MS, 'the last tool progress in job.progress');
    expect(progress).toMatchObject({ turnId: turn.turnId, type: 'tool_progress', name: 'build' });
    expect(Buffer.byteLength((progress as { text: string }).text)).toBeLessThanOrEqual(256);
    release();
    const job = await finished(added.id!);
    expect([await job.getState(), job.failedReason, job.returnvalue]).toEqual(['completed', undefined, 'ok']);
  });

  it('stopJob reaches a job running in this process without a fleet, and one on another instance through the fleet', async () => {
    // Here: the processor's runner stops it.
    const here = bodyStarts();
    worker(turnProcessor({ runner: s.runner }, async (job, turn) => {
      here.open(job, turn);
      await new Promise((resolve) => turn.signal.addEventListener('abort', resolve, { once: true }));
      return 'stopped';
    }));
    const local = await s.queue.add('agent', { sessionId: 'local' }, { attempts: 3 });
    const { turn } = await here.started;
    expect(await stopJob(s.queue, local.id!)).toMatchObject({ outcome: 'stopped', jobId: local.id, sessionId: 'local', turnId: turn.turnId, report: { reason: StopReasons.user } });
    expect(await (await finished(local.id!)).getState()).toBe('failed');
    await s.workers.pop()!.close();

    // Another instance: worker A runs turns through fleet A; the stop goes through fleet B.
    const runnerB = new TurnRunner({ registry: s.registry });
    const fleetA = await Fleet.start({ redis: s.redis, runner: s.runner, prefix: `${s.prefix}-fleet` });
    const fleetB = await Fleet.start({ redis: s.redis, runner: runnerB, prefix: `${s.prefix}-fleet` });
    s.fleets.push(fleetA, fleetB);
    const there = bodyStarts();
    worker(turnProcessor({ runner: s.runner, fleet: fleetA }, async (job, t) => {
      there.open(job, t);
      await new Promise((resolve) => t.signal.addEventListener('abort', resolve, { once: true }));
      return 'stopped';
    }));
    const remote = await s.queue.add('agent', { sessionId: 'remote' }, { attempts: 3 });
    const started = await there.started;
    const queueB = new Queue('jobs', { connection: s.redis, prefix: s.prefix });
    try {
      expect(await stopJob(queueB, remote.id!, { fleet: fleetB })).toMatchObject({ outcome: 'stopped', jobId: remote.id, sessionId: 'remote', turnId: started.turn.turnId });
    } finally {
      await queueB.close();
    }
    const job = await finished(remote.id!);
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(await fleetB.turn('remote')).toMatchObject({ status: 'cancelled', reason: StopReasons.user });
    expect(await stopJob(s.queue, remote.id!, { fleet: fleetB })).toMatchObject({ outcome: 'already_finished', status: 'failed' });
  });

  it('a job whose session is busy waits (delayed, no attempt counted) and runs once the session is free', async () => {
    let release!: () => void;
    const chat = s.runner.run('busy', () => new Promise<string>((resolve) => { release = () => resolve('chat done'); }));
    let ran = 0;
    worker(turnProcessor({ runner: s.runner, requeueDelayMs: 100 }, async () => { ran++; return 'job done'; }));
    const added = await s.queue.add('agent', { sessionId: 'busy' }, { attempts: 1 }); // one attempt: a failure would be for good
    await eventually(async () => ((await s.queue.getJob(added.id!))?.attemptsStarted ?? 0) >= 2, LIVENESS_MS, 'the job tried again');
    expect(ran).toBe(0);
    expect((await s.queue.getJob(added.id!))!.attemptsMade).toBe(0);
    release();
    expect(await chat).toMatchObject({ status: 'completed' });
    const job = await finished(added.id!);
    expect([await job.getState(), job.returnvalue]).toEqual(['completed', 'job done']);
    expect(ran).toBe(1);
  });

  it('bad options are refused when the processor is made, naming the option', () => {
    expect(() => turnProcessor({} as never, async () => 1)).toThrow(/^options\.runner/);
    expect(() => turnProcessor({ runner: s.runner, requeueDelayMs: -1 }, async () => 1)).toThrow(RangeError);
    expect(() => turnProcessor({ runner: s.runner, progress: { maxBytes: 1 } }, async () => 1)).toThrow(/^options\.progress\.maxBytes/);
    expect(() => turnProcessor({ runner: s.runner }, 'body' as never)).toThrow(/^body/);
  });

  it('a stop error is a JobStoppedError (UnrecoverableError) with a stable code', () => {
    const error = new JobStoppedError('cancel.user', 't1');
    expect(error).toMatchObject({ code: 'ERR_FULLSTOP_JOB_STOPPED', reason: 'cancel.user', turnId: 't1' });
  });
});
