// PG-N's floor (docs/postgres.md, "Capacity"): the same turns as `TurnRunner` + `PgLedger` write, through per-instance
// group commit on raw `pg` and no lock shared by instances. One INSERT (one transaction) in flight per instance; the rows
// appended meanwhile, or in the same synchronous run, go in the next one, in call order. A stop is the intent row
// committed, the signal and the turn's unwinding, then its history's rows committed: the two ordered commits PgLedger makes.
import type pg from 'pg';

type Waiter = { rows: string[][]; resolve: () => void; reject: (error: unknown) => void };

/** One instance's writer: group commit of `[sessionId, turnId, body]` rows into `table`. */
export class FloorWriter {
  readonly #pool: pg.Pool;
  readonly #insert: string;
  #queue: Waiter[] = [];
  /** True while a transaction is in flight or about to start: what arrives meanwhile waits for the next one. */
  #busy = false;

  constructor(pool: pg.Pool, table: string) {
    this.#pool = pool;
    this.#insert = `INSERT INTO ${table} (session_id, turn_id, body) SELECT * FROM unnest($1::text[], $2::text[], $3::json[])`;
  }

  /** Resolves once `rows` are committed. */
  append(rows: string[][]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ rows, resolve, reject });
      if (!this.#busy) {
        this.#busy = true;
        queueMicrotask(() => void this.#drain());
      }
    });
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0);
      const rows = batch.flatMap((w) => w.rows);
      try {
        await this.#pool.query(this.#insert, [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2])]);
        for (const w of batch) w.resolve();
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    }
    this.#busy = false;
  }
}

/** The table the floor writes: what a history needs at least (a global order, the session's index). */
export const floorTable = (table: string) => `CREATE TABLE ${table} (seq bigserial PRIMARY KEY, session_id text NOT NULL, turn_id text NOT NULL,
  body json NOT NULL); CREATE INDEX ON ${table} (session_id, seq)`;

const row = (sessionId: string, turnId: string, body: object) => [sessionId, turnId, JSON.stringify({ at: Date.now(), sessionId, turnId, ...body })];

/** A turn of the floor: its start, its says (`tick` each), its stop. */
export class FloorTurn {
  readonly controller = new AbortController();
  readonly #writer: FloorWriter;
  readonly #ids: [string, string];
  #ended!: () => void;
  /** Resolves once the turn is over (its history committed, or its loop returned). */
  readonly ended = new Promise<void>((resolve) => { this.#ended = resolve; });
  #loop: Promise<unknown> = Promise.resolve();

  constructor(writer: FloorWriter, sessionId: string, turnId: string) {
    this.#writer = writer;
    this.#ids = [sessionId, turnId];
  }

  /** The body: `turn_started`, then `say` every `everyMs` until stopped (or `ending` aborts: the turn completes). */
  start(text: string, everyMs: number, tick: () => void, ending: AbortSignal, sleep: (ms: number, signals: AbortSignal[]) => Promise<boolean>): void {
    this.#loop = (async () => {
      await this.#writer.append([row(...this.#ids, { type: 'turn_started' })]);
      for (let next = performance.now(); !this.controller.signal.aborted;) {
        await this.#writer.append([row(...this.#ids, { type: 'say', text })]);
        if (this.controller.signal.aborted) break;
        tick();
        next = Math.max(next + everyMs, performance.now());
        if (!(await sleep(next - performance.now(), [this.controller.signal, ending]))) break;
      }
      if (!this.controller.signal.aborted) {
        await this.#writer.append([row(...this.#ids, { type: 'status', status: 'completed' })]);
        this.#ended();
      }
    })();
  }

  /** The stop: the intent committed, the signal and the body's unwinding, the history committed; ms from the call. */
  async stop(): Promise<number> {
    const t0 = performance.now();
    await this.#writer.append([row(...this.#ids, { type: 'status', status: 'cancelling', reason: 'cancel.user' })]);
    this.controller.abort();
    await this.#loop.catch(() => {});
    await this.#writer.append([row(...this.#ids, { type: 'turn_aborted', text: 'The user stopped this turn on purpose.' }),
      row(...this.#ids, { type: 'status', status: 'cancelled', reason: 'cancel.user' })]);
    const ms = performance.now() - t0;
    this.#ended();
    return ms;
  }
}
