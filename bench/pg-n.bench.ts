// PG-N (docs/postgres.md, "Capacity"): N `PgLedger` instances in one process (so the CPU is the same for every N), each
// with its own small pg.Pool on one schema; 64 sessions spread over them stream `turn.say` 20 times a second, then 80
// stops of random running turns (one every STOP_EVERY_MS). Against the floor in the same run (bench/pg-n-floor.ts): the
// same load and the same two ordered commits a stop through per-instance group commit on raw pg, no cross-instance lock.
// Commits are made ~2 ms slow on both sides (commit_delay=2000, commit_siblings=0 on every connection), as a cloud
// disk's. Stop: request → `turn_aborted` emitted (the floor: → its history committed). entries/s: `say`s committed a
// second while the stops run (64 × 20 = 1,280 asked). The sides alternate in rounds, STOPS / ROUNDS stops each.
// PG-N-16-2db (not in --quick): the same at 16 instances, each instance's ledger a ShardedLedger over two databases
// (the second made with CREATE DATABASE, dropped after): what adding a database does (docs/postgres.md, "Capacity").
// The database: PG* variables, else 127.0.0.1:5432, user postgres, database test; a schema of its own a row, dropped.
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import pg from 'pg';
import { ShardedLedger, TurnRegistry, TurnRunner, type LedgerStore } from '../src/index.js';
import { PgLedger } from '../src/ledger/postgres/index.js';
import { assertNothingLive, compare, quantile, suiteOf, type BenchResult, type SuiteContext } from './harness.js';
import { floorTable, FloorTurn, FloorWriter } from './pg-n-floor.js';

const SESSIONS = 64;
const SAY_EVERY_MS = 50;
const STOPS = 80;
const ROUNDS = 2;
const STOP_EVERY_MS = 40;
const WARMUP_MS = 600;
const TEXT = 'token '.repeat(8);
const SLOW_COMMITS = '-c commit_delay=2000 -c commit_siblings=0';
const connection = () => ({ host: process.env.PGHOST ?? '127.0.0.1', user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'test' });

/** Waits `ms`; false when one of `signals` aborted first (the timer is cleared). */
function sleep(ms: number, signals: AbortSignal[]): Promise<boolean> {
  if (signals.some((s) => s.aborted)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (value: boolean) => { clearTimeout(timer); for (const s of signals) s.removeEventListener('abort', onAbort); resolve(value); };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), Math.max(0, ms));
    for (const s of signals) s.addEventListener('abort', onAbort, { once: true });
  });
}

/** One side's instances: `run` one turn of a session to its end, `stop` its running turn (ms). */
interface Side {
  run(instance: number, sessionId: string, turnId: string, tick: () => void, ending: AbortSignal): Promise<void>;
  stop(instance: number, sessionId: string): Promise<number>;
}

type Round = { stopMs: number[]; entriesPerSecond: number };

/** The load on one side: every session's turns back to back, STOPS / ROUNDS stops of random running turns, then the end. */
async function drive(side: Side, n: number, stops: number, tag: string): Promise<Round> {
  const ending = new AbortController();
  setMaxListeners(SESSIONS * 2, ending.signal); // every sleeping turn listens to it
  const running = new Set<number>(); // sessions whose current turn has committed a say and is not being stopped
  let [says, counting] = [0, false];
  const loops = Array.from({ length: SESSIONS }, async (_, i) => {
    for (let t = 0; !ending.signal.aborted; t++) {
      let first = true;
      await side.run(i % n, `s${i}`, `${tag}-s${i}-t${t}`, () => {
        if (counting) says++;
        if (first) running.add(i);
        first = false;
      }, ending.signal);
      running.delete(i);
    }
  });
  await sleep(WARMUP_MS, []);
  counting = true;
  const t0 = performance.now();
  const stopMs: number[] = [];
  const stopping: Promise<void>[] = [];
  for (let k = 0; k < stops; k++) {
    const candidates = [...running];
    if (candidates.length > 0) {
      const i = candidates[Math.floor(Math.random() * candidates.length)]!;
      running.delete(i);
      stopping.push(side.stop(i % n, `s${i}`).then((ms) => { stopMs.push(ms); }));
    } else k--;
    await sleep(STOP_EVERY_MS, []);
  }
  await Promise.all(stopping);
  const entriesPerSecond = says / ((performance.now() - t0) / 1000);
  counting = false;
  ending.abort();
  await Promise.all(loops);
  return { stopMs, entriesPerSecond };
}

/** N pools with slow commits (max 2 connections each: one transaction in flight an instance, and a spare). */
function pools(n: number, database = connection().database): pg.Pool[] {
  return Array.from({ length: n }, () => {
    const pool = new pg.Pool({ ...connection(), database, max: 2, options: SLOW_COMMITS, connectionTimeoutMillis: 5000 });
    pool.on('error', () => {});
    return pool;
  });
}

/**
 * One round of PgLedger: N instances on one schema, each its runner (one registry), its ledger and its pool. With two
 * databases (PG-N-16-2db), each instance's ledger is a ShardedLedger of a PgLedger on each, each its own pool.
 */
async function pgLedgerRound(n: number, stops: number, schema: string, tag: string, databases: string[]): Promise<Round> {
  const ps = databases.flatMap((database) => pools(n, database));
  const registry = new TurnRegistry();
  const opened = await Promise.all(ps.map((pool, k) => PgLedger.open({ pool, schema, instanceId: `${tag}-i${k % n}` })));
  const ledgers: LedgerStore[] = databases.length === 1 ? opened
    : Array.from({ length: n }, (_, k) => new ShardedLedger({ stores: databases.map((_, d) => opened[d * n + k]!) }));
  const runners = ledgers.map((ledger) => new TurnRunner({ registry, ledger, graceMs: 5000 }));
  const aborted = new Map<string, () => void>();
  for (const r of runners) r.on('turn_aborted', ({ sessionId }) => aborted.get(sessionId)?.());
  try {
    return await drive({
      async run(k, sessionId, turnId, tick, ending) {
        await runners[k]!.run(sessionId, async (turn) => {
          for (let next = performance.now(); ;) {
            await turn.say(TEXT);
            tick();
            next = Math.max(next + SAY_EVERY_MS, performance.now());
            if (!(await sleep(next - performance.now(), [turn.signal, ending]))) break;
          }
          turn.signal.throwIfAborted();
        }, { turnId });
      },
      async stop(k, sessionId) {
        const heard = new Promise<number>((resolve) => aborted.set(sessionId, () => resolve(performance.now())));
        const t0 = performance.now();
        const report = await runners[k]!.stop(sessionId);
        const at = await heard;
        aborted.delete(sessionId);
        if (report === null || report.ledgerError !== undefined) throw new Error(`PG-N: the stop of ${sessionId} ended ${String(report?.ledgerError)}`);
        return at - t0;
      },
    }, n, stops, tag);
  } finally {
    await Promise.all(ledgers.map((l) => l.close()));
    await Promise.all(ps.map((p) => p.end()));
    assertNothingLive(registry, 'PG-N');
  }
}

/** One round of the floor: N writers, each its pool, one table. */
async function floorRound(n: number, stops: number, schema: string, tag: string): Promise<Round> {
  const ps = pools(n);
  const table = `"${schema}".floor_${tag}`;
  await ps[0]!.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"; ${floorTable(table)}`);
  const writers = ps.map((pool) => new FloorWriter(pool, table));
  const turns = new Map<string, FloorTurn>();
  try {
    return await drive({
      async run(k, sessionId, turnId, tick, ending) {
        const turn = new FloorTurn(writers[k]!, sessionId, turnId);
        turns.set(sessionId, turn);
        turn.start(TEXT, SAY_EVERY_MS, tick, ending, sleep);
        await turn.ended;
      },
      stop: (_k, sessionId) => turns.get(sessionId)!.stop(),
    }, n, stops, tag);
  } finally {
    await Promise.all(ps.map((p) => p.end()));
  }
}

const p90 = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.9);

/** The row of N instances (on `databases`): stop latency (p50, p99; p90 in extra), entries/s of both sides in extra. */
async function rowOf(ctx: SuiteContext, admin: pg.Pool, n: number, commitDelay: string, databases = [connection().database]): Promise<BenchResult> {
  const stops = ctx.quick ? 20 : STOPS;
  const schema = `bench_pgn_${randomBytes(5).toString('hex')}`;
  const [led, floor] = [[] as Round[], [] as Round[]];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      ctx.progress(`PG-N: N=${n} round ${r + 1}/${ROUNDS}`);
      const sides = [() => pgLedgerRound(n, stops / ROUNDS, schema, `l${r}`, databases).then((x) => led.push(x)),
        () => floorRound(n, stops / ROUNDS, schema, `f${r}`).then((x) => floor.push(x))];
      for (const side of r % 2 === 0 ? sides : sides.reverse()) await side();
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    for (const database of databases.slice(1)) await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  }
  const [ls, fs] = [led.flatMap((x) => x.stopMs), floor.flatMap((x) => x.stopMs)];
  const eps = (rounds: Round[]) => Math.round(rounds.reduce((a, x) => a + x.entriesPerSecond, 0) / rounds.length);
  const [le, fe] = [eps(led), eps(floor)];
  const [id, metric] = databases.length === 1 ? [`PG-N-${n}`, `${n} PgLedger instances`] : [`PG-N-${n}-${databases.length}db`, `${n} instances, ShardedLedger over ${databases.length} databases`];
  return compare({ id, metric: `${metric}, ${SESSIONS} sessions saying 20/s: stop request → turn_aborted`, unit: 'ms', extra: {
    goal: n >= 16 && databases.length === 1 ? 'stop p50 ≤ 1.5×, p90 ≤ 2× the floor; entries/s ≥ 0.9×' : 'reported', stops: ls.length, commitDelay,
    p90: { pgLedger: Math.round(p90(ls) * 10) / 10, floor: Math.round(p90(fs) * 10) / 10, ratio: Math.round((p90(ls) / p90(fs)) * 100) / 100 },
    entriesPerSecond: { asked: SESSIONS * (1000 / SAY_EVERY_MS), pgLedger: le, floor: fe, ratio: Math.round((le / fe) * 100) / 100 },
  } }, ls, ['floor: per-instance group commit on raw pg, no shared lock', fs], { paired: false });
}

export const suite = suiteOf({
  async 'PG-N'(ctx) {
    const admin = new pg.Pool({ ...connection(), max: 1, options: SLOW_COMMITS, connectionTimeoutMillis: 2000 });
    try {
      let commitDelay: string;
      try {
        commitDelay = (await admin.query('SHOW commit_delay')).rows[0].commit_delay as string;
      } catch (error) {
        ctx.progress(`no PostgreSQL (${(error as Error).message}) — PG-N skipped (start it: pg_ctlcluster <version> main start)`);
        return [];
      }
      if (commitDelay !== '2000') throw new Error(`PG-N: commit_delay on a pooled connection is ${commitDelay}, not 2000 (the role may not set it)`);
      const { rows } = await admin.query('SELECT current_setting(\'max_connections\')::int - count(*) AS free FROM pg_stat_activity');
      const rows$: BenchResult[] = [];
      for (const n of ctx.quick ? [1, 4] : [1, 4, 16, 32]) {
        if (2 * n + 2 > Number(rows[0].free)) { ctx.progress(`PG-N: N=${n} skipped: ${rows[0].free} connections free`); continue; }
        rows$.push(await rowOf(ctx, admin, n, commitDelay));
      }
      // When to add a database (docs/postgres.md, "Capacity"): the same load at 16 instances, sessions over two databases.
      if (!ctx.quick && 4 * 16 + 2 <= Number(rows[0].free)) {
        const second = `bench_pgn_${randomBytes(5).toString('hex')}`;
        await admin.query(`CREATE DATABASE "${second}"`);
        rows$.push(await rowOf(ctx, admin, 16, commitDelay, [connection().database, second]));
      }
      return rows$;
    } finally {
      await admin.end();
    }
  },
});
