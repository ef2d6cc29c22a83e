/**
 * The repair of an abandoned turn (`closeAbandonedTurn`, a restart's repair) writes only if the
 * turn is still as it read it (issue 48 item 13: removing the check "turn changed since read" in
 * `append_entries` — verdict `stale` — left every postgres spec green). Here the turn's owner
 * writes between the repair's read and its write, by a handshake: the repair's pool holds its
 * appending call until the owner's entry is committed. The repair then reads again and closes the
 * turn as it now is: no `tool_aborted` for a call that has its output, the stop's `cancelled`
 * rather than `interrupted` once a stop's intent is recorded, and nothing after the owner's end.
 */
import { describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../dist/src/index.js';
import { PgLedger, type PgPool, type PgQuery } from '../dist/src/ledger/postgres/index.js';
import { pgScene } from './support/pg.js';

const pg = pgScene('repair');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);

/**
 * `pool`, but the first appending call that carries a repair's expected state (`append_entries`
 * with a non-null `p_expect_turn`, its 10th value) waits for `between()` before it is sent.
 */
function holdFirstRepairWrite(pool: PgPool, between: () => Promise<void>): { pool: PgPool; held: () => number; failure: () => unknown } {
  let held = 0;
  let failure: unknown;
  return {
    held: () => held,
    // A throw in `between` would read as a lost answer to the repair (sent again): kept for the test to see.
    failure: () => failure,
    pool: {
      async connect() {
        const client = await pool.connect();
        return {
          async query(query: PgQuery) {
            if (held === 0 && query.text.includes('append_entries(') && query.values?.[9] != null) {
              held++;
              await between().catch((error: unknown) => { failure = error; });
            }
            return client.query(query);
          },
          release: (destroy?: Error | boolean) => client.release(destroy),
          on: (event: 'error', listener: (error: Error) => void) => client.on(event, listener),
          off: (event: 'error', listener: (error: Error) => void) => client.off(event, listener),
        };
      },
    },
  };
}

/** A's turn `t` in session `s` with an open call `c1`; B on a pool that runs `between` after B's repair read it. */
async function scene(between: (a: PgLedger) => Promise<void>) {
  const schema = pg.schema();
  // closeWaitMs: A's own stop is left under way (its owner is taken for dead), close need not wait for it.
  const a = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A', closeWaitMs: 0 });
  await a.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
  await a.append({ sessionId: 's', turnId: 't', type: 'tool_call', callId: 'c1', name: 'shell', args: { cmd: 'sleep 9' } });
  await a.flush();
  const gated = holdFirstRepairWrite(pg.pool(), () => between(a));
  const b = await PgLedger.open({ pool: gated.pool, schema, instanceId: 'B' });
  return { a, b, held: () => { expect(gated.failure()).toBeUndefined(); return gated.held(); } };
}

describe('a repair whose turn changed after it read it', () => {
  it('the owner wrote the call\'s output meanwhile: the repair reads again and writes no tool_aborted for that call', async () => {
    const { a, b, held } = await scene(async (owner) => {
      await owner.append({ sessionId: 's', turnId: 't', type: 'tool_output', callId: 'c1', output: 'done', success: true });
      await owner.flush();
    });
    expect(await b.closeAbandonedTurn('s', 't', 'lease.expired')).toBe(true);
    expect(held()).toBe(1);
    const history = await b.entries({ turnId: 't' });
    expect(history.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_output', 'status:interrupted']);
    expect(history.filter((e) => e.type === 'tool_aborted')).toEqual([]);
    expect(history.at(-1)).toMatchObject({ reason: 'lease.expired' });
    await Promise.all([a.close(), b.close()]);
  });

  it('the owner recorded a stop\'s intent meanwhile: the repair closes it as a stop (cancelled with the stop\'s reason), not interrupted', async () => {
    const { a, b, held } = await scene(async (owner) => {
      await owner.append({ sessionId: 's', turnId: 't', type: 'status', status: 'cancelling', reason: 'user.stop' });
    });
    expect(await b.closeAbandonedTurn('s', 't', 'lease.expired')).toBe(true);
    expect(held()).toBe(1);
    const history = await b.entries({ turnId: 't' });
    expect(history.map(typeOf)).toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    expect(history.at(-1)).toMatchObject({ reason: 'user.stop' });
    await Promise.all([a.close(), b.close()]);
  });

  it('the owner ended the turn meanwhile: the repair writes nothing and says it closed nothing', async () => {
    const { a, b, held } = await scene(async (owner) => {
      await owner.append({ sessionId: 's', turnId: 't', type: 'tool_output', callId: 'c1', output: 'done', success: true });
      await owner.append({ sessionId: 's', turnId: 't', type: 'status', status: 'completed' });
    });
    expect(await b.closeAbandonedTurn('s', 't', 'lease.expired')).toBe(false);
    expect(held()).toBe(1);
    expect((await b.entries({ turnId: 't' })).map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_output', 'status:completed']);
    await Promise.all([a.close(), b.close()]);
  });
});
