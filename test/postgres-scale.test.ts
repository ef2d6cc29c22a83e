/**
 * No lock every instance waits on (issue 49, items 1 and 2): a session's transaction in progress
 * holds no other session's appends; a reader paging every session with `afterSeq` never skips an
 * entry that commits late; `open` migrates a schema of the first release and never waits on a
 * lock while instances append; a streamed token costs no commit of its own, and the queue is
 * bounded (backpressure).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { LedgerTimeoutError, TurnIdUsedError, TurnRegistry, TurnRunner, type LedgerEntry, type Turn } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgLedgerHooks } from '../dist/src/ledger/postgres/pg-ledger-hooks.js';
import { SCHEMA_VERSION } from '../dist/src/ledger/postgres/statements.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { PG, pgScene } from './support/pg.js';

const pg = pgScene('scale');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);
const open = (schema: string, instanceId: string, extra: object = {}) => PgLedger.open({ pool: pg.pool(), schema, instanceId, ...extra });
/** `promise`'s outcome, or 'pending' once `ms` passed (a liveness bound, generous). */
const within = <T>(promise: Promise<T>, ms: number) => Promise.race([promise.then(() => 'settled'), new Promise<string>((r) => setTimeout(() => r('pending'), ms))]);
const tick = () => new Promise((r) => setImmediate(r));

/** One row for `append_entries` called by hand (a transaction the test holds open). */
function handCall(schema: string, sessionId: string, turnId: string, text: string) {
  const body = JSON.stringify({ at: Date.now(), sessionId, turnId, type: 'say', text });
  // The function itself (its arrays as arrays; the bodies as one text, joined by newlines: one body here).
  const call = `SELECT "${schema}".append_entries($1, $2, $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
    string_to_array($9, chr(10)), $10, $11, $12, $13) AS verdicts`;
  return { text: call, values: ['A', `hand-${text}`, [1], [sessionId], [turnId], ['say'], [null], [Date.now()], body, null, null, 5000, false] };
}

describe('sessions do not wait for each other', () => {
  it('a transaction of session X held open: other sessions commit; a reader paging all sessions with afterSeq skips nothing that commits later', async () => {
    const schema = pg.schema();
    const [a, b, reader] = [await open(schema, 'A'), await open(schema, 'B'), await open(schema, 'reader')];
    await a.append({ sessionId: 'x', turnId: 'tx', type: 'turn_started' });
    await b.append({ sessionId: 'y', turnId: 'ty', type: 'turn_started' });
    const seen: LedgerEntry[] = [];
    const page = async () => {
      const got = await reader.entries({ afterSeq: seen.at(-1)?.seq ?? 0, limit: 1000 });
      seen.push(...got);
      return got;
    };
    await page();
    const held = await pg.pool(PG.port, { max: 1 }).connect();
    try {
      await held.query('BEGIN');
      const call = handCall(schema, 'x', 'tx', 'late');
      expect((await held.query(call.text, call.values)).rows[0].verdicts).toEqual(['ok']); // x's lock and an xid, held
      // Another instance's session commits meanwhile.
      const yWrites = (async () => { await b.append({ sessionId: 'y', turnId: 'ty', type: 'say', text: 'early' }); await b.flush(); })();
      expect(await within(yWrites, 3000)).toBe('settled');
      // x's own next append waits for x's transaction (its order), without failing.
      await a.append({ sessionId: 'x', turnId: 'tx', type: 'say', text: 'after' });
      const xFlush = a.flush();
      expect(await within(xFlush, 300)).toBe('pending');
      // Committed, but above the horizon while x's transaction is open: not in a page yet. (The
      // horizon is the server's: a transaction of another client, in any database, holds pages
      // back too, so what a page has seen so far is only bounded, never asserted whole.)
      await page();
      expect(seen.map((e) => e.type === 'say' ? e.text : e.type)).not.toContain('early');
      expect(seen.map((e) => e.type === 'say' ? e.text : e.type)).not.toContain('late');
      await held.query('COMMIT');
      await xFlush;
    } finally {
      held.release();
    }
    // Once nothing older runs, paging reaches every committed entry, in seq order, none skipped.
    const all = await reader.entries();
    const deadline = Date.now() + 30_000;
    while (seen.length < all.length && Date.now() < deadline) {
      if ((await page()).length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(seen.map((e) => e.seq)).toEqual(all.map((e) => e.seq));
    expect((await reader.entries({ sessionId: 'x' })).map((e) => e.type === 'say' ? e.text : e.type)).toEqual(['turn_started', 'late', 'after']);
    await Promise.all([a.close(), b.close(), reader.close()]);
  });
});

/** The history an older release wrote, as its append took it: a turn ended in s1, one left open in s2. */
const OLD_ROWS: [string, string, string, string | null, object][] = [
  ['s1', 't-ended', 'turn_started', null, {}], ['s1', 't-ended', 'say', null, { text: 'old' }], ['s1', 't-ended', 'status', 'completed', { status: 'completed' }],
  ['s2', 't-open', 'turn_started', null, {}], ['s2', 't-open', 'tool_call', null, { callId: 'c', name: 'n', args: {} }],
];

/**
 * A schema an earlier build wrote with its own SQL (a fixture: its statements, `placeholder` for the
 * schema name), `seq_offset` recorded; `append` sends one row through that build's own call and
 * gives its verdicts.
 */
async function earlierSchema(fixture: string, placeholder: string, offset: number) {
  const schema = pg.schema();
  const old = JSON.parse(readFileSync(new URL(`./fixtures/${fixture}`, import.meta.url), 'utf8')) as { migration: string[]; recordVersion: string; append: string };
  const admin = pg.pool(PG.port, { max: 1 });
  const sql = (text: string) => text.replaceAll(placeholder, schema);
  for (const statement of old.migration) await admin.query(sql(statement));
  await admin.query(sql(old.recordVersion), [offset]);
  let local = 0;
  const append = async (sessionId: string, turnId: string, type: string, status: string | null, extra: object): Promise<string[]> => {
    const at = Date.now();
    const body = JSON.stringify({ at, sessionId, turnId, type, ...extra });
    const { rows: [{ verdicts }] } = await admin.query(sql(old.append), ['A', 'w1', [++local], [sessionId], [turnId], [type], [status], [at], body, null, null, 5000, false]);
    return verdicts;
  };
  return { schema, admin, append };
}

/** 40 says of `turnId` in one batch, past the row-by-row size (the set way): in order, numbered from `offset`. */
async function saysNumberedFrom(b: PgLedger, sessionId: string, turnId: string, offset: number): Promise<void> {
  await Promise.all(Array.from({ length: 40 }, (_, i) => b.append({ sessionId, turnId, type: 'say', text: `say ${i}` })));
  await b.flush();
  const written = (await b.entries({ turnId })).slice(1);
  expect(written.map((e) => (e as { text: string }).text)).toEqual(Array.from({ length: 40 }, (_, i) => `say ${i}`));
  for (const e of written) expect(e.seq % 4096).toBeGreaterThan(offset);
}

describe('open', () => {
  it('migrates a schema written by the first release: its history readable, appends above its seqs, its turns\' rules kept', async () => {
    const schema = pg.schema();
    const v1 = JSON.parse(readFileSync(new URL('./fixtures/pg-schema-v1.json', import.meta.url), 'utf8')) as { migration: string[]; append: string };
    const admin = pg.pool(PG.port, { max: 1 });
    for (const statement of v1.migration) await admin.query(statement.replaceAll('SCHEMA_V1', schema));
    let local = 0;
    for (const [sessionId, turnId, type, status, extra] of OLD_ROWS) {
      const at = Date.now();
      const body = JSON.stringify({ at, sessionId, turnId, type, ...extra });
      await admin.query(v1.append.replaceAll('SCHEMA_V1', schema), ['A', 'w1', [++local], [sessionId], [turnId], [type], [status], [at], [body], null, null]);
    }
    const b = await open(schema, 'B');
    const old = await b.entries();
    expect(old.map((e) => [e.seq, e.turnId, typeOf(e)])).toEqual([
      [1, 't-ended', 'turn_started'], [2, 't-ended', 'say'], [3, 't-ended', 'status:completed'], [4, 't-open', 'turn_started'], [5, 't-open', 'tool_call']]);
    expect((await admin.query(`SELECT value FROM "${schema}".meta WHERE key = 'version'`)).rows[0].value).toBe(String(SCHEMA_VERSION));
    await b.append({ sessionId: 's3', turnId: 't-new', type: 'turn_started' });
    expect((await b.entries({ turnId: 't-new' }))[0]!.seq).toBeGreaterThan(5);
    await expect(b.append({ sessionId: 's3', turnId: 't-ended', type: 'turn_started' })).rejects.toBeInstanceOf(TurnIdUsedError);
    await expect(b.append({ sessionId: 's2', turnId: 't-open', type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/another instance/);
    // A restarts under its name: its open turn of the first release is closed, after its old entries.
    const a = await open(schema, 'A');
    const repaired = await a.entries({ sessionId: 's2' });
    expect(repaired.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
    expect(repaired[2]!.seq).toBeGreaterThan(5);
    await expect(a.append({ sessionId: 's1', turnId: 't-ended', type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/has ended/);
    await Promise.all([a.close(), b.close()]);
  });

  it('migrates a schema of version 2 in place: its entries and seqs kept, its seq_offset kept for new seqs, used turn ids and owners kept', async () => {
    // An offset a recomputation would not give (it would be 0 here): new seqs must still be (xid << 12) + 1000 + i.
    const OFFSET = 1000;
    const { schema, admin, append } = await earlierSchema('pg-schema-v2.json', 'SCHEMA_V2', OFFSET);
    for (const row of OLD_ROWS) expect(await append(...row)).toEqual(['ok']);
    const before = (await admin.query(`SELECT seq::text AS seq, turn_id FROM "${schema}".entries ORDER BY seq`)).rows.map((r) => [Number(r.seq), r.turn_id]);
    const b = await open(schema, 'B');
    expect((await b.entries()).map((e) => [e.seq, e.turnId])).toEqual(before);
    expect((await b.entries()).map(typeOf)).toEqual(['turn_started', 'say', 'status:completed', 'turn_started', 'tool_call']);
    const meta = (await admin.query(`SELECT key, value::text AS value FROM "${schema}".meta ORDER BY key`)).rows;
    expect(meta).toEqual([{ key: 'seq_offset', value: String(OFFSET) }, { key: 'version', value: String(SCHEMA_VERSION) }]);
    // One row alone in its transaction is its batch's first: (xid << 12) + offset + 1.
    await b.append({ sessionId: 's3', turnId: 't-new', type: 'turn_started' });
    const [started] = await b.entries({ turnId: 't-new' });
    expect(started!.seq).toBeGreaterThan(before.at(-1)![0] as number);
    expect(started!.seq % 4096).toBe(OFFSET + 1);
    // A batch past the row-by-row size goes the set way: numbered from the same offset, in order.
    await saysNumberedFrom(b, 's3', 't-new', OFFSET);
    await expect(b.append({ sessionId: 's3', turnId: 't-ended', type: 'turn_started' })).rejects.toBeInstanceOf(TurnIdUsedError);
    await expect(b.append({ sessionId: 's2', turnId: 't-open', type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/another instance/);
    // A restarts under its name: its open turn of version 2 is closed, after its old entries.
    const a = await open(schema, 'A');
    const repaired = await a.entries({ sessionId: 's2' });
    expect(repaired.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
    expect(repaired[2]!.seq).toBeGreaterThan(before.at(-1)![0] as number);
    await expect(a.append({ sessionId: 's1', turnId: 't-ended', type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/has ended/);
    await Promise.all([a.close(), b.close()]);
  });

  it('migrates a schema of version 3 while instances append (no wait): its seqs and offset kept, its turns given room, a version 3 instance still appending', async () => {
    const OFFSET = 1000; // the fixture's function has it baked in
    const { schema, admin, append: appendV3 } = await earlierSchema('pg-schema-v3.json', 'SCHEMA_V3', OFFSET);
    for (const row of OLD_ROWS) expect(await appendV3(...row)).toEqual(['ok']);
    const before = (await admin.query(`SELECT seq::text AS seq, turn_id FROM "${schema}".entries ORDER BY seq`)).rows.map((r) => [Number(r.seq), r.turn_id]);
    // Instances appending hold what an append holds on both tables: the migration must not wait on them.
    const held = await pg.pool(PG.port, { max: 1 }).connect();
    let b: PgLedger;
    try {
      await held.query('BEGIN');
      await held.query(`LOCK TABLE "${schema}".turns, "${schema}".entries IN ROW EXCLUSIVE MODE`);
      const opening = open(schema, 'B', { timeoutMs: 5000 });
      expect(await within(opening, 3000)).toBe('settled');
      b = await opening;
    } finally {
      await held.query('COMMIT');
      held.release();
    }
    expect((await b.entries()).map((e) => [e.seq, e.turnId])).toEqual(before);
    const meta = (await admin.query(`SELECT key, value::text AS value FROM "${schema}".meta ORDER BY key`)).rows;
    expect(meta).toEqual([{ key: 'seq_offset', value: String(OFFSET) }, { key: 'version', value: String(SCHEMA_VERSION) }]);
    const [{ options }] = (await admin.query(`SELECT reloptions AS options FROM pg_class WHERE oid = '"${schema}".turns'::regclass`)).rows;
    expect(options).toEqual(['fillfactor=50']);
    await b.append({ sessionId: 's3', turnId: 't-new', type: 'turn_started' });
    const [started] = await b.entries({ turnId: 't-new' });
    expect(started!.seq % 4096).toBe(OFFSET + 1);
    // A batch past the row-by-row size goes the set way: numbered from the same offset, in order.
    await saysNumberedFrom(b, 's3', 't-new', OFFSET);
    // An instance of version 3 (its own call, arrays and all) appends through the new function, by the same rules.
    expect(await appendV3('s2', 't-open', 'say', null, { text: 'from v3' })).toEqual(['ok']);
    expect(await appendV3('s1', 't-ended', 'turn_started', null, {})).toEqual(['used']);
    const last = (await b.entries({ turnId: 't-open' })).at(-1)!;
    expect([(last as { text: string }).text, last.seq % 4096]).toEqual(['from v3', OFFSET + 1]);
    await expect(b.append({ sessionId: 's2', turnId: 't-open', type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/another instance/);
    await b.close();
  });

  it('migrates a schema of version 3 whose turns a VACUUM holds: the fillfactor is skipped after the lock timeout, the rest migrates', async () => {
    const { schema, admin } = await earlierSchema('pg-schema-v3.json', 'SCHEMA_V3', 1000);
    const held = await pg.pool(PG.port, { max: 1 }).connect();
    let b: PgLedger;
    try {
      await held.query('BEGIN');
      await held.query(`LOCK TABLE "${schema}".turns IN SHARE UPDATE EXCLUSIVE MODE`); // what a VACUUM holds
      b = await open(schema, 'B', { timeoutMs: 10_000 });
    } finally {
      await held.query('COMMIT');
      held.release();
    }
    expect((await admin.query(`SELECT value::text AS value FROM "${schema}".meta WHERE key = 'version'`)).rows[0].value).toBe(String(SCHEMA_VERSION));
    expect((await admin.query(`SELECT reloptions AS options FROM pg_class WHERE oid = '"${schema}".turns'::regclass`)).rows[0].options).toBeNull();
    await b.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    expect((await b.entries({ turnId: 't' }))[0]!.seq % 4096).toBe(1001);
    await b.close();
  });

  it('of a current schema waits on no lock: with the retention DELETE left open, a new instance opens and appends commit', async () => {
    const schema = pg.schema();
    const a = await open(schema, 'A');
    await a.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    const held = await pg.pool(PG.port, { max: 1 }).connect();
    try {
      await held.query('BEGIN');
      await held.query(`DELETE FROM "${schema}".entries WHERE seq < 0`);
      const opening = open(schema, 'C', { timeoutMs: 5000 });
      expect(await within(opening, 3000)).toBe('settled');
      const c = await opening;
      const appended = c.append({ sessionId: 's2', turnId: 't2', type: 'turn_started' });
      expect(await within(appended, 3000)).toBe('settled');
      await held.query('COMMIT');
      await c.close();
    } finally {
      held.release();
      await a.close();
    }
  });
});

describe('a streamed token', () => {
  it('1,000 awaited turn.say in one turn share a handful of transactions, and flush still waits for all of them', async () => {
    const schema = pg.schema();
    const ledger = await open(schema, 'A');
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, ledger });
    let before = 0;
    let after = 0;
    const outcome = await runner.run('s', async (turn: Turn) => {
      await ledger.flush();
      before = pgLedgerHooks(ledger)!.transactions;
      for (let i = 0; i < 1000; i++) await turn.say(`token ${i} `);
      await ledger.flush();
      after = pgLedgerHooks(ledger)!.transactions;
    });
    expect(outcome.status).toBe('completed');
    expect(after - before).toBeLessThanOrEqual(50); // 1,000 before: a commit each
    const says = (await ledger.entries({ sessionId: 's' })).filter((e) => e.type === 'say');
    expect(says.map((e) => (e as { text: string }).text)).toEqual(Array.from({ length: 1000 }, (_, i) => `token ${i} `));
    await ledger.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });

  it('the queue is bounded: with the database not answering, the 10,001st append waits until rows settle, and the flush fails within its bound', async () => {
    const proxy = await TcpProxy.start(PG.port);
    try {
      const schema = pg.schema();
      const ledger = await PgLedger.open({ pool: pg.pool(proxy.port), schema, instanceId: 'A', timeoutMs: 1500 });
      await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
      proxy.hang();
      const states: string[] = [];
      const appends = Array.from({ length: 10_001 }, (_, i) => {
        const p = ledger.append({ sessionId: 's', turnId: 't', type: 'say', text: `token ${i}` });
        p.then(() => { states[i] = 'ok'; }, () => { states[i] = 'rejected'; });
        return p;
      });
      await tick();
      await tick();
      expect(states.filter((s) => s === 'ok')).toHaveLength(10_000);
      expect(states[10_000]).toBeUndefined();
      // Let in once the transaction in flight gave up (its rows settled): then it fails as they did.
      expect(await within(appends[10_000]!.catch(() => {}), 5000)).toBe('settled');
      await expect(ledger.flush()).rejects.toThrow(LedgerTimeoutError);
      proxy.pass();
      await ledger.close();
    } finally {
      await proxy.close();
    }
  });
});
