/**
 * `PgLedger.close()` keeps promise 6: it waits (at most `closeWaitMs`) for the stops under way to
 * write and commit their history, taking only their appends meanwhile. README's SIGTERM recipe
 * (`shutdown` with a deadline shorter than a stop's grace, then `ledger.close()`) leaves every
 * stopped turn complete in the shared schema, as another instance reads it.
 */
import { describe, expect, it } from 'vitest';
import { TurnRegistry, TurnRunner, type LedgerEntry } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { deafTurns } from './support/deaf-turns.js';
import { pgScene } from './support/pg.js';

const pg = pgScene('close');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);
const NO_LEAKS = { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 };

describe('PgLedger.close waits for the stops under way', () => {
  it("README's SIGTERM recipe (shutdown past its deadline, then close) leaves every stopped turn complete for another instance", async () => {
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger, graceMs: 500 });
    const { outcomes, release, signalled } = await deafTurns(runner, 3);
    // The recipe, with a deadline far shorter than the stops' grace: shutdown resolves mid-stop.
    const reports = await runner.shutdown({ deadlineMs: 100 });
    expect(reports).toEqual([]);
    await signalled;
    await ledger.close();

    const reader = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'B' });
    for (let i = 0; i < 3; i++) {
      const history = await reader.entries({ turnId: `t${i}` });
      expect(history.map(typeOf), `t${i}`).toEqual(['turn_started', 'say', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
      expect(history.at(-1)).toMatchObject({ reason: 'cancel.shutdown' });
    }
    await reader.close();
    release();
    const settled = await Promise.all(outcomes);
    expect(settled.map((o) => o.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(settled.map((o) => o.report?.ledgerError)).toEqual([undefined, undefined, undefined]);
    expect(registry.stats()).toEqual(NO_LEAKS);
  });

  it('takes only the stopping turns\' appends while it waits', async () => {
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger, graceMs: 300 });
    const { outcomes, release, signalled } = await deafTurns(runner, 1);
    const stopped = runner.stop('s0');
    await signalled;
    const closed = ledger.close();
    await expect(ledger.append({ sessionId: 'other', turnId: 'x', type: 'turn_started' })).rejects.toThrow(/closed/);
    await closed;
    expect((await stopped)?.ledgerError).toBeUndefined();
    release();
    expect((await outcomes[0])!.status).toBe('cancelled');
    const reader = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'B' });
    expect(await reader.entries({ turnId: 'x' })).toEqual([]);
    expect((await reader.entries({ turnId: 't0' })).map(typeOf).at(-1)).toBe('status:cancelled');
    await reader.close();
    expect(registry.stats()).toEqual(NO_LEAKS);
  });

  it('waits at most closeWaitMs: past it the ledger closes and the stop still runs, its report saying the ledger closed', async () => {
    const schema = pg.schema();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A', closeWaitMs: 50 });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger, graceMs: 60_000 });
    const { outcomes, release, signalled } = await deafTurns(runner, 1);
    const stopped = runner.stop('s0');
    await signalled;
    await ledger.close(); // the stop's grace is a minute: close does not wait for it
    const reader = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'B' });
    expect((await reader.entries({ turnId: 't0' })).map(typeOf)).toEqual(['turn_started', 'say', 'tool_call', 'status:cancelling']);
    await reader.close();
    release();
    const report = await stopped;
    expect(report?.ledgerError?.message).toMatch(/closed/);
    expect((await outcomes[0])!.status).toBe('cancelled');
    expect(registry.stats()).toEqual(NO_LEAKS);
  }, 8_000); // a close that ignored closeWaitMs would wait the default 10 s
});
