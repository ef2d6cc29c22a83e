/**
 * The fleet and the turns' history: a dead owner's turn, marked `interrupted` by a sweep, has its
 * history closed in the shared store by the sweeping instance (`closeAbandonedTurn`, once
 * fleet-wide; a failing store is a warning, never a broken sweep; live turns untouched); and a
 * stop's `ledgerError` reaches its requester as `{ name, message, code }`. On the shared Redis.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, dropKeys, Host, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';
import { eventually, FleetScene, held } from './fixtures/fleet/scene.js';
import { MemoryLedger } from './fixtures/fleet/memory-ledger.js';

const up = await redisReachable();
if (!up) console.warn(`fleet-ledger tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

describe.skipIf(!up)('the fleet and the history', () => {
  let scene: FleetScene;
  let raw: Client;
  let dir: string;
  let host: Host | undefined;

  beforeEach(async () => {
    raw = await client();
    dir = mkdtempSync(join(tmpdir(), 'fleet-ledger-'));
    scene = new FleetScene(uniquePrefix(), () => client());
  });

  afterEach(async () => {
    try {
      await host?.kill();
      await scene.cleanup();
    } finally {
      host = undefined;
      await dropKeys(raw, scene.prefix);
      await raw.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** Instance A in a child process (a file ledger of its own), running one turn of `s-dead`. */
  async function deadOwner(): Promise<void> {
    host = new Host({ prefix: scene.prefix, nodeId: `A-${scene.prefix}`, ledger: join(dir, 'a.jsonl'), port: REDIS_PORT, leaseMs: 600, renewMs: 200, sweepMs: 60_000 });
    await host.next((e) => e.type === 'ready');
    host.send({ cmd: 'run', sessionId: 's-dead', turnId: 't-dead' });
    await host.next((e) => e.type === 'started');
    await host.kill();
  }

  it('a SIGKILLed owner\'s turn: exactly one sweeping instance closes its history in the shared store, once; live instances\' turns are never touched', async () => {
    const ledgerB = new MemoryLedger();
    const ledgerC = new MemoryLedger();
    const b = await scene.instance('B', { leaseMs: 600, renewMs: 200, sweepMs: 50 }, { ledger: ledgerB });
    const c = await scene.instance('C', { leaseMs: 600, renewMs: 200, sweepMs: 50 }, { ledger: ledgerC });
    // A live turn on C, running through every sweep.
    const h = held();
    const live = c.fleet.run('s-live', h.body, { turnId: 't-live' });
    const liveTurn = await h.started;
    await deadOwner();
    await eventually(async () => (await b.fleet.turn('s-dead'))?.status === 'interrupted', 10_000, 'a sweep to mark the dead owner\'s turn');
    await eventually(() => ledgerB.abandoned.length + ledgerC.abandoned.length > 0, 5000, 'the history to be closed');
    // More sweeps on both instances find nothing more to close.
    await Promise.all([b.fleet.sweep(), c.fleet.sweep(), b.fleet.sweep(), c.fleet.sweep()]);
    expect([...ledgerB.abandoned, ...ledgerC.abandoned]).toEqual([['s-dead', 't-dead', 'lease.expired']]);
    expect(liveTurn.signal.aborted).toBe(false);
    expect(await b.fleet.turn('s-live')).toMatchObject({ status: 'running', node: c.fleet.nodeId });
    h.release();
    expect(await live).toMatchObject({ status: 'completed' });
  });

  it('a store whose closeAbandonedTurn fails is reported as a process warning, and the sweep goes on', async () => {
    const failing = new MemoryLedger({ failClose: new Error('database away') });
    const b = await scene.instance('B', { leaseMs: 600, renewMs: 200, sweepMs: 60_000 }, { ledger: failing });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => { if (w.name === 'FullstopFleetSweepWarning') warnings.push(w); };
    process.on('warning', onWarning);
    try {
      await deadOwner();
      let swept = 0;
      await eventually(async () => (swept += await b.fleet.sweep()) > 0, 10_000, 'the sweep to mark the dead owner\'s turn');
      expect(swept).toBe(1);
      expect(failing.abandoned).toEqual([['s-dead', 't-dead', 'lease.expired']]);
      await eventually(() => warnings.length === 1, 5000, 'the warning');
      expect(warnings[0]!.message).toMatch(/t-dead.*database away/);
      expect(await b.fleet.turn('s-dead')).toMatchObject({ status: 'interrupted', reason: 'lease.expired' });
      // The sweep still works: a later run and stop of the session go through.
      expect(await b.fleet.run('s-dead', async () => 2)).toMatchObject({ status: 'completed', value: 2 });
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('fleet.close() during a sweep waits for the history it is closing: a store closed right after has closed the dead owner\'s turn', async () => {
    // A store whose closeAbandonedTurn takes a database's time (a query in flight), and which refuses once closed.
    let entered!: () => void;
    const inFlight = new Promise<void>((resolve) => { entered = resolve; });
    let storeClosed = false;
    const closedTurns: string[] = [];
    const store = new MemoryLedger();
    store.closeAbandonedTurn = async (_sessionId: string, turnId: string) => {
      entered();
      await new Promise((resolve) => setTimeout(resolve, 300));
      if (storeClosed) throw new Error('store closed');
      closedTurns.push(turnId);
      return true;
    };
    store.close = async () => { storeClosed = true; };
    const b = await scene.instance('B', { leaseMs: 600, renewMs: 200, sweepMs: 60_000 }, { ledger: store });
    await deadOwner();
    // Sweep until one marks the dead owner's turn: that one is in its store call.
    let sweeping: Promise<number> | undefined;
    await eventually(async () => {
      const run = b.fleet.sweep();
      if (await Promise.race([inFlight.then(() => true), run.then(() => false)])) sweeping = run;
      return sweeping !== undefined;
    }, 10_000, 'a sweep to mark the dead owner\'s turn');
    // The shutdown order of a server: the fleet, then the store.
    await b.fleet.close();
    await store.close();
    expect(await sweeping!.catch(() => -1)).toBe(1);
    expect(closedTurns).toEqual(['t-dead']);
  });

  it('a stop\'s ledgerError reaches the requester as { name, message, code }', async () => {
    const error = Object.assign(new Error('disk on fire'), { code: 'EIO' });
    const ledger = new MemoryLedger({ failAppend: (e) => e.type === 'status' && (e as { status?: string }).status === 'cancelling', error });
    const a = await scene.instance('A', {}, { ledger });
    const b = await scene.instance('B');
    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't1' });
    await h.started;
    const answer = await b.fleet.stop('s1', { timeoutMs: 5000 });
    const outcome = await run;
    const local = outcome.report!.ledgerError as Error & { code?: string };
    expect(local).toBeInstanceOf(Error);
    expect(answer.outcome).toBe('stopped');
    const relayed = answer.outcome === 'stopped' ? answer.report.ledgerError : undefined;
    expect(relayed).toEqual({ name: local.name, message: local.message, ...(local.code === undefined ? {} : { code: local.code }) });
    expect(relayed).toMatchObject({ message: expect.stringContaining('disk on fire') });
  });
});
