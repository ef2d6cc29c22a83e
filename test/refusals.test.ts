/**
 * Every deliberate refusal is an error class with a stable `code`, the same in every store
 * (DESIGN §11.3): a used turn id, an append after the turn's end and an append to a closed store,
 * from the file `Ledger` and from `PgLedger` alike; and `fleet.run` on a closed fleet.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fullstop from '../dist/src/index.js';
import * as fleetEntry from '../dist/src/fleet/index.js';
import { Ledger, type LedgerStore } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgScene } from './support/pg.js';
import { redisReachable, REDIS_PORT } from './fixtures/fleet/support.js';
import { redisScene } from './fixtures/fleet/backends.js';

const pg = pgScene('refusals');
const dirs: string[] = [];
afterEach(() => { for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true }); });

/** What a refusal must be: its class (looked up by name in the entry point that exports it) and its code. */
function refusal(className: string, code: string, entry: Record<string, unknown> = fullstop): (error: unknown) => void {
  return (error) => {
    expect(error).toMatchObject({ name: className, code });
    const cls = entry[className] as (new (...args: never[]) => Error) | undefined;
    expect(cls, `${className} is exported`).toBeTypeOf('function');
    expect(error).toBeInstanceOf(cls!);
    expect(error).toBeInstanceOf(Error);
  };
}

/** The rejection of `promise` (it must reject). */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection, got a resolution');
}

const stores: Array<[string, () => Promise<LedgerStore>]> = [
  ['the file Ledger', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-refusals-'));
    dirs.push(dir);
    return Ledger.open(join(dir, 'history.jsonl'));
  }],
  ['PgLedger', () => PgLedger.open({ pool: pg.pool(), schema: pg.schema(), instanceId: 'refusals' })],
];

describe.each(stores)('%s refuses with the same classes and codes', (_, open) => {
  it('a used turn id: TurnIdUsedError, ERR_FULLSTOP_TURN_ID_USED, naming the turn', async () => {
    const store = await open();
    try {
      await store.append({ sessionId: 's1', turnId: 't1', type: 'turn_started' });
      const error = await rejectionOf(store.append({ sessionId: 's2', turnId: 't1', type: 'turn_started' }));
      refusal('TurnIdUsedError', 'ERR_FULLSTOP_TURN_ID_USED')(error);
      expect(error).toMatchObject({ turnId: 't1' });
    } finally {
      await store.close();
    }
  });

  it('an append after the turn\'s end: TurnEndedError, ERR_FULLSTOP_TURN_ENDED, naming the turn', async () => {
    const store = await open();
    try {
      await store.append({ sessionId: 's1', turnId: 't1', type: 'turn_started' });
      await store.append({ sessionId: 's1', turnId: 't1', type: 'status', status: 'completed' });
      // PgLedger takes a streamed entry once queued (LedgerStore promise 1): the database's
      // refusal reaches the caller at its next awaited point, the turn's flush.
      const late = store.append({ sessionId: 's1', turnId: 't1', type: 'say', text: 'late' });
      const error = store instanceof PgLedger
        ? await late.then(() => rejectionOf(store.flush('t1')), (e: unknown) => e)
        : await rejectionOf(late);
      refusal('TurnEndedError', 'ERR_FULLSTOP_TURN_ENDED')(error);
      expect(error).toMatchObject({ turnId: 't1' });
    } finally {
      await store.close();
    }
  });

  it('an append to a closed store: LedgerClosedError, ERR_FULLSTOP_LEDGER_CLOSED', async () => {
    const store = await open();
    await store.close();
    refusal('LedgerClosedError', 'ERR_FULLSTOP_LEDGER_CLOSED')(await rejectionOf(store.append({ sessionId: 's1', turnId: 't1', type: 'turn_started' })));
  });
});

describe('the other calls of a closed store refuse as its append does', () => {
  it('Ledger.removeSegments and PgLedger.closeAbandonedTurn: LedgerClosedError', async () => {
    const [, openFile] = stores[0]!;
    const file = await openFile() as Ledger;
    await file.close();
    refusal('LedgerClosedError', 'ERR_FULLSTOP_LEDGER_CLOSED')(await rejectionOf(file.removeSegments(1)));
    const shared = await PgLedger.open({ pool: pg.pool(), schema: pg.schema(), instanceId: 'refusals' });
    await shared.close();
    refusal('LedgerClosedError', 'ERR_FULLSTOP_LEDGER_CLOSED')(await rejectionOf(shared.closeAbandonedTurn('s1', 't1')));
  });
});

const redisUp = await redisReachable();
if (!redisUp) console.warn(`refusals.test.ts fleet tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT})`);

describe.skipIf(!redisUp)('a closed fleet', () => {
  const current = redisScene();

  it('fleet.run refuses with FleetClosedError, ERR_FULLSTOP_FLEET_CLOSED, starting nothing', async () => {
    const a = await current.scene.instance('A');
    await a.fleet.close();
    let calls = 0;
    const error = await rejectionOf(a.fleet.run('s1', async () => { calls++; }));
    refusal('FleetClosedError', 'ERR_FULLSTOP_FLEET_CLOSED', fleetEntry)(error);
    expect(calls).toBe(0);
    expect(fullstop.ErrorCodes).toMatchObject({ turnEnded: 'ERR_FULLSTOP_TURN_ENDED', ledgerClosed: 'ERR_FULLSTOP_LEDGER_CLOSED', fleetClosed: 'ERR_FULLSTOP_FLEET_CLOSED' });
  });
});
