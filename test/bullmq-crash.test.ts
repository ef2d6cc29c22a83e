/**
 * A worker process SIGKILLed mid-job: BullMQ's stalled check gives the job back (no attempt
 * counted, so a one-attempt job is not failed for good), another worker runs it as a new turn once
 * the fleet's sweep has found the dead attempt's lease ended, and that sweep closed the dead
 * attempt's history in the shared PgLedger (`interrupted`). Real BullMQ, Redis and PostgreSQL.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { Queue, Worker } from 'bullmq';
import { TurnRunner } from '../dist/src/index.js';
import { Fleet } from '../dist/src/fleet/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { turnProcessor } from '../dist/src/bullmq/index.js';
import { client, dropKeys, keysUnder, redisReachable, REDIS_PORT, uniquePrefix } from './fixtures/fleet/support.js';
import { eventually } from './fixtures/fleet/scene.js';
import { PG, pgScene } from './support/pg.js';

const up = await redisReachable();
if (!up) console.warn(`bullmq-crash tests skipped: no Redis at 127.0.0.1:${REDIS_PORT}`);
const pgs = pgScene('bullmq');
const LIVENESS_MS = 20_000;
const LEASE_MS = 1500;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.skipIf(!up)('a worker SIGKILLed mid-job', () => {
  it('BullMQ retries the job as a new turn on another worker; the dead attempt\'s history is closed interrupted', { timeout: 60_000 }, async () => {
    const redis = await client();
    cleanups.push(() => redis.quit());
    const prefix = uniquePrefix();
    const fleetPrefix = `${prefix}-fleet`;
    cleanups.push(() => dropKeys(redis, fleetPrefix));
    const schema = pgs.schema();
    const pool = pgs.pool();
    const queue = new Queue('jobs', { connection: redis, prefix });
    cleanups.push(async () => {
      await queue.obliterate({ force: true });
      await queue.close();
      expect(await keysUnder(redis, prefix)).toEqual([]);
    });

    // Both workers check for stalled jobs every 300 ms: a check sets a queue-wide key that holds
    // every worker's next check off for the checker's own stalledInterval.
    const child = spawn(process.execPath, [
      fileURLToPath(new URL('./fixtures/bullmq/dies-mid-job.mjs', import.meta.url)),
      JSON.stringify({ redisPort: REDIS_PORT, pg: PG, schema, prefix, fleetPrefix, queue: 'jobs', leaseMs: LEASE_MS, lockDuration: 1000, stalledInterval: 300 }),
    ], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    cleanups.push(async () => { child.kill('SIGKILL'); await exited; });
    const lines = createInterface({ input: child.stdout! });
    const said = (type: string) => new Promise<Record<string, string>>((resolve) => {
      const onLine = (line: string) => {
        const message = JSON.parse(line) as Record<string, string>;
        if (message.type === type) { lines.off('line', onLine); resolve(message); }
      };
      lines.on('line', onLine);
    });
    await said('ready');
    const started = said('started');
    const added = await queue.add('agent', { sessionId: 'crash-1' }, { attempts: 1 });
    const dead = await started;
    child.kill('SIGKILL');
    await exited;

    const ledger = await PgLedger.open({ pool, schema, instanceId: 'survivor' });
    cleanups.push(() => ledger.close());
    const runner = new TurnRunner({ ledger });
    const fleet = await Fleet.start({ redis, runner, prefix: fleetPrefix, leaseMs: LEASE_MS });
    cleanups.push(() => fleet.close());
    const turnIds: string[] = [];
    const worker = new Worker('jobs', turnProcessor({ runner, fleet, requeueDelayMs: 200 }, async (_job, turn) => {
      turnIds.push(turn.turnId);
      return 'recovered';
    }), { connection: redis, prefix, stalledInterval: 300, maxStalledCount: 1 });
    worker.on('error', () => {});
    cleanups.push(() => worker.close());

    await eventually(async () => ['completed', 'failed'].includes(await queue.getJobState(added.id!)), LIVENESS_MS, 'the job finished');
    const job = (await queue.getJob(added.id!))!;
    expect([await job.getState(), job.returnvalue]).toEqual(['completed', 'recovered']);
    expect(job.attemptsStarted).toBeGreaterThanOrEqual(2);
    expect(turnIds).toHaveLength(1);
    expect(turnIds[0]).not.toBe(dead.turnId);
    // The sweep marks the record interrupted (which frees the session), then closes the history.
    let history: Awaited<ReturnType<typeof ledger.entries>> = [];
    await eventually(async () => {
      history = await ledger.entries({ turnId: dead.turnId });
      return history.at(-1)?.type === 'status';
    }, LIVENESS_MS, 'the dead attempt\'s history closed');
    expect(history[0]).toMatchObject({ type: 'turn_started', sessionId: 'crash-1' });
    expect(history.at(-1)).toMatchObject({ type: 'status', status: 'interrupted' });
    expect((await ledger.entries({ turnId: turnIds[0] })).at(-1)).toMatchObject({ type: 'status', status: 'completed' });
  });
});
