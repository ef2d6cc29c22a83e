// R1-pg, L1-pg and PG-say: the stop and the stream on `PgLedger` (docs/benchmarks.md). PG-say: 1,000 awaited `turn.say` in one
// turn on `PgLedger`, its commits made ~2 ms slower (commit_delay=2000, commit_siblings=0 on its connections: a cloud disk),
// against the same turn on the file `Ledger`, in the same run. R1-pg: one cooperative stop, request → `turn_aborted`,
// against its ordered floor done raw with `pg` in the same pairs (an INSERT committed, the signal, the history's INSERT
// committed). L1-pg: 1,000 running turns stopped at once on `PgLedger`: its transactions a storm, and its time against the
// same storm with no ledger, beside the file ledger's. The database: PG* environment variables, else 127.0.0.1:5432,
// user postgres, database test; each run uses a schema of its own and drops it.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Ledger, TurnRegistry, TurnRunner, type LedgerStore, type TurnOutcome } from '../src/index.js';
import { PgLedger } from '../src/ledger/postgres/index.js';
import { pgLedgerHooks } from '../src/ledger/postgres/pg-ledger-hooks.js';
import { assertNothingLive, compare, median, samplePairs, suiteOf, type SuiteContext } from './harness.js';
import { countdown, untilStopped, waitingTurn } from './turns.js';

const GRACE_MS = 5000; // far above any cooperative settle: no sample times out into a hard stop
const STORM = 1000;

const SAYS = 1000;
/** Commits ~2 ms slower, as on a cloud disk (PG-say): set on every connection of the pool. */
const SLOW_COMMITS = '-c commit_delay=2000 -c commit_siblings=0';

/** A pool and a fresh schema for `fn`, dropped after; no rows (a note) when PostgreSQL does not answer. */
async function withDatabase<T>(ctx: SuiteContext, id: string, fn: (pool: pg.Pool, schema: string) => Promise<T[]>, options?: string): Promise<T[]> {
  const pool = new pg.Pool({ host: process.env.PGHOST ?? '127.0.0.1', user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'test',
    connectionTimeoutMillis: 2000, ...(options === undefined ? {} : { options }) });
  const schema = `bench_${randomBytes(5).toString('hex')}`;
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end();
    ctx.progress(`no PostgreSQL (${(error as Error).message}) — ${id} skipped (start it: pg_ctlcluster <version> main start)`);
    return [];
  }
  try {
    return await fn(pool, schema);
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}

/** One stop of a waiting turn: request → its `turn_aborted`, ms. */
async function oneStop(runner: TurnRunner, ledger: PgLedger, turnId: string, transactions: number[]): Promise<number> {
  const running = countdown(1);
  const outcome = runner.run('measured', waitingTurn('llm', running.tick), { turnId });
  await running.done;
  await ledger.flush(); // the turn's entries so far committed: the stop is measured alone
  let heardAt = Number.NaN;
  runner.once('turn_aborted', () => { heardAt = performance.now(); });
  const [t0, before] = [performance.now(), pgLedgerHooks(ledger)!.transactions];
  const report = await runner.stop('measured');
  transactions.push(pgLedgerHooks(ledger)!.transactions - before);
  const { status } = await outcome;
  if (report === null || status !== 'cancelled' || !report.settledCooperatively || report.ledgerError !== undefined) {
    throw new Error(`R1-pg: ${turnId} ended ${status} (${String(report?.ledgerError)})`);
  }
  return heardAt - t0;
}

/** The ordered floor, raw `pg` on the same pool: the intent INSERT committed, the signal and its unwinding, the history's INSERT committed. */
async function orderedFloor(pool: pg.Pool, table: string, n: number): Promise<number> {
  const controller = new AbortController();
  const unwound = Promise.allSettled([untilStopped(controller.signal)]);
  const row = (type: string, extra: object) => JSON.stringify({ at: Date.now(), sessionId: 'floor', turnId: `floor-${n}`, type, ...extra });
  const t0 = performance.now();
  await pool.query(`INSERT INTO ${table} (body) VALUES ($1::json)`, [row('status', { status: 'cancelling', reason: 'cancel.user' })]);
  controller.abort();
  await unwound;
  await pool.query(`INSERT INTO ${table} (body) SELECT unnest($1::text[])::json`, [[
    row('tool_aborted', { callId: 'c', output: 'aborted by user after 0.1s' }), row('turn_aborted', { text: 'The user stopped this turn on purpose.' }),
    row('status', { status: 'cancelled', reason: 'cancel.user' })]]);
  return performance.now() - t0;
}

type StormSample = { ms: number; transactions: number };

/** STORM running turns stopped at once: ms from the first stop() to the last `turn_aborted`. */
async function storm(runner: TurnRunner, ledger: LedgerStore | undefined, tag: string): Promise<StormSample> {
  const sessions = Array.from({ length: STORM }, (_, i) => `${tag}-${i}`);
  const running = countdown(STORM);
  const outcomes: Promise<TurnOutcome<unknown>>[] = sessions.map((s) => runner.run(s, waitingTurn('llm', running.tick)));
  await running.done;
  await ledger?.flush();
  const before = ledger instanceof PgLedger ? pgLedgerHooks(ledger)!.transactions : 0;
  const aborted = countdown(STORM);
  const onAborted = () => aborted.tick();
  runner.on('turn_aborted', onAborted);
  const t0 = performance.now();
  for (const s of sessions) void runner.stop(s);
  await aborted.done;
  const ms = performance.now() - t0;
  runner.off('turn_aborted', onAborted);
  const statuses = new Set((await Promise.all(outcomes)).map((o) => o.status));
  if (statuses.size !== 1 || !statuses.has('cancelled')) throw new Error(`L1-pg: a storm ended ${[...statuses].join(', ')}`);
  return { ms, transactions: (ledger instanceof PgLedger ? pgLedgerHooks(ledger)!.transactions : 0) - before };
}

/** One turn of `SAYS` awaited `turn.say`: ms from its first say to its last one resolved, then its flush (outside the time). */
async function sayTurn(runner: TurnRunner, ledger: LedgerStore, sessionId: string): Promise<number> {
  let ms = Number.NaN;
  const outcome = await runner.run(sessionId, async (turn) => {
    const t0 = performance.now();
    for (let i = 0; i < SAYS; i++) await turn.say(`token ${i} `);
    ms = performance.now() - t0;
  });
  await ledger.flush();
  if (outcome.status !== 'completed') throw new Error(`PG-say: a turn ended ${outcome.status}`);
  return ms;
}

export const suite = suiteOf({
  async 'PG-say'(ctx) {
    const pairs = ctx.quick ? 2 : 5;
    const registry = new TurnRegistry();
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-pgsay-'));
    try {
      return await withDatabase(ctx, 'PG-say', async (pool, schema) => {
        const { rows: [delay] } = await pool.query('SHOW commit_delay');
        if (delay?.commit_delay !== '2000') throw new Error(`PG-say: commit_delay is ${String(delay?.commit_delay)}, not 2000 (the slow commits did not take)`);
        const [ledger, file] = [await PgLedger.open({ pool, schema, instanceId: 'bench' }), await Ledger.open(join(dir, 'history.jsonl'))];
        try {
          const [onPg, onFile] = [ledger, file].map((l) => new TurnRunner({ registry, ledger: l }));
          let n = 0;
          const { samples: s } = await samplePairs('PG-say', { pairs, warmup: 1 }, {
            pg: () => sayTurn(onPg!, ledger, `pg${++n}`),
            file: () => sayTurn(onFile!, file, `file${++n}`),
          }, ctx);
          assertNothingLive(registry, 'PG-say');
          return [compare({ id: 'PG-say', metric: `${SAYS} awaited turn.say in one turn on PgLedger (commits ~2 ms slower: commit_delay=2000)`, unit: 'ms', extra: {
            goal: '≤ 2×', says: SAYS, pairs,
          } }, s.pg, ['the same turn on the file Ledger', s.file])];
        } finally {
          await Promise.all([ledger.close(), file.close()]);
        }
      }, SLOW_COMMITS);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },

  async 'R1-pg'(ctx) {
    const pairs = ctx.quick ? 10 : 200;
    const registry = new TurnRegistry();
    return withDatabase(ctx, 'R1-pg', async (pool, schema) => {
      const ledger = await PgLedger.open({ pool, schema, instanceId: 'bench' });
      const table = `"${schema}".floor`;
      await pool.query(`CREATE TABLE ${table} (seq bigserial PRIMARY KEY, body json NOT NULL)`);
      try {
        const runner = new TurnRunner({ registry, ledger, graceMs: GRACE_MS });
        let n = 0;
        const transactions: number[] = [];
        const { samples: s } = await samplePairs('R1-pg', { pairs, warmup: ctx.quick ? 3 : 20 }, {
          stop: () => oneStop(runner, ledger, `r1pg-${++n}`, transactions),
          floor: () => orderedFloor(pool, table, ++n),
        }, ctx);
        assertNothingLive(registry, 'R1-pg');
        return [compare({ id: 'R1-pg', metric: 'cooperative turn on PgLedger: stop request → turn_aborted emitted', unit: 'ms', extra: {
          goal: '≤ 1.6×', pairs, transactionsPerStop: { median: median(transactions), max: Math.max(...transactions) },
        } }, s.stop, ['ordered floor: raw pg INSERT+COMMIT, abort, INSERT+COMMIT', s.floor])];
      } finally {
        await ledger.close();
      }
    });
  },

  async 'L1-pg'(ctx) {
    const pairs = ctx.quick ? 2 : 6;
    const registry = new TurnRegistry();
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-l1pg-'));
    try {
      return await withDatabase(ctx, 'L1-pg', async (pool, schema) => {
        const [ledger, file] = [await PgLedger.open({ pool, schema, instanceId: 'bench' }), await Ledger.open(join(dir, 'history.jsonl'))];
        try {
          const [onPg, onFile, without] = [ledger, file, undefined].map((l) => new TurnRunner({ registry, ledger: l, graceMs: GRACE_MS }));
          let storms = 0;
          const { samples: s } = await samplePairs('L1-pg', { pairs, warmup: 1 }, {
            pg: () => storm(onPg!, ledger, `pg${++storms}`),
            none: () => storm(without!, undefined, `none${++storms}`),
            file: () => storm(onFile!, file, `file${++storms}`),
          }, ctx);
          assertNothingLive(registry, 'L1-pg');
          const transactions = s.pg.map((x) => x.transactions);
          return [compare({ id: 'L1-pg', metric: `stop storm on PgLedger: ${STORM} running turns stopped at once → last turn_aborted`, unit: 'ms', extra: {
            goal: '≤ 100 transactions a storm', turns: STORM, pairs,
            transactionsPerStorm: { median: median(transactions), max: Math.max(...transactions) },
            fileLedgerMedianMs: Math.round(median(s.file.map((x) => x.ms))),
          } }, s.pg.map((x) => x.ms), ['the same storm, no ledger', s.none.map((x) => x.ms)], { shape: ['the same storm, file Ledger', s.file.map((x) => x.ms)] })];
        } finally {
          await Promise.all([ledger.close(), file.close()]);
        }
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
