/**
 * `PgLedger.open`'s options: their documentation, defaults and checks (each bad one a TypeError or
 * RangeError naming it, before anything touches the database).
 */

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { DEFAULT_LEDGER_CLOSE_WAIT_MS, DEFAULT_PG_INTENT_TIMEOUT_MS, DEFAULT_PG_SCHEMA, DEFAULT_PG_TIMEOUT_MS } from '../../constants.js';
import { checkId, checkMs, describe } from '../../errors.js';
import { checkSchemaName } from './statements.js';
import type { PgPool } from './pool.js';

/** Options of `PgLedger.open`. */
export interface PgLedgerOptions {
  /**
   * The node-postgres pool to use (`new pg.Pool(...)`, `pg` 8). The caller owns it: the ledger
   * checks a client out for each transaction or read and never ends the pool.
   */
  pool: PgPool;
  /**
   * The schema that holds the ledger's tables (created when missing). Letters, digits and `_`.
   * Instances that share a history use the same schema.
   * @default 'fullstop'
   */
  schema?: string;
  /**
   * This instance's name in the store: the owner of the turns it starts. At open, the unfinished
   * turns of this `instanceId` are closed (a restart), so give a restarted process the name it had
   * (a pod name, a host:port) and no two live processes the same one. In one process, a second
   * open of the same pool, schema and `instanceId` while the first is open is refused.
   * @default `${hostname}:${pid}:${random}` (new at every start: no restart repair)
   */
  instanceId?: string;
  /**
   * The bound of every wait on the database, in ms: an append or flush settles, and `open`,
   * `entries` and `closeAbandonedTurn` resolve or reject, within it (an append waiting
   * behind a transaction that got no answer included), whatever timeouts the pool has.
   * @default 5000
   */
  timeoutMs?: number;
  /**
   * How long a stop's signal waits for its intent (`cancelling`) to commit, in ms; past it the stop
   * signals anyway and its report's `ledgerError` says so (`LedgerStore.intentTimeoutMs`).
   * @default 1000
   */
  intentTimeoutMs?: number;
  /**
   * How long `close()` waits for the stops under way (their `cancelling` appended, their end not
   * yet) to append and commit their history, in ms, as the file `Ledger`'s `closeWaitMs`. Then it
   * waits at most `timeoutMs` more for the appends under way: `close` settles within the sum.
   * @default 10_000 (DEFAULT_LEDGER_CLOSE_WAIT_MS)
   * @example
   * await PgLedger.open({ pool, closeWaitMs: 30_000 }); // stops with a long grace still close whole
   */
  closeWaitMs?: number;
  /**
   * Send the append as a prepared statement (`pg` prepares it once a connection, then binds and
   * runs it: about 0.1 ms less a transaction). Turn it off behind a pooler that does not keep
   * prepared statements (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`).
   * @default true
   */
  preparedStatements?: boolean;
}

/** The options with their defaults applied. */
export interface ResolvedOptions {
  pool: PgPool;
  schema: string;
  instanceId: string;
  timeoutMs: number;
  intentTimeoutMs: number;
  closeWaitMs: number;
  preparedStatements: boolean;
}

const WHERE = 'PgLedger.open';

/** Checks `options` and applies the defaults. */
export function resolveOptions(options: unknown): ResolvedOptions {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${WHERE}: options: expected an object with a pool, got ${describe(options)}`);
  }
  const {
    pool, schema = DEFAULT_PG_SCHEMA, instanceId, timeoutMs = DEFAULT_PG_TIMEOUT_MS, intentTimeoutMs = DEFAULT_PG_INTENT_TIMEOUT_MS,
    closeWaitMs = DEFAULT_LEDGER_CLOSE_WAIT_MS, preparedStatements = true,
  } = options as Record<string, unknown>;
  if (pool === null || typeof pool !== 'object' || typeof (pool as { connect?: unknown }).connect !== 'function') {
    throw new TypeError(`${WHERE}: options.pool: expected a pg.Pool (an object with connect()), got ${describe(pool)}`);
  }
  checkSchemaName(`${WHERE}: options.schema`, schema);
  if (instanceId !== undefined) checkId(`${WHERE}: options.instanceId`, instanceId);
  checkMs(`${WHERE}: options.timeoutMs`, timeoutMs);
  if (timeoutMs === 0) throw new RangeError(`${WHERE}: options.timeoutMs: expected more than 0 ms, got 0`);
  checkMs(`${WHERE}: options.intentTimeoutMs`, intentTimeoutMs);
  checkMs(`${WHERE}: options.closeWaitMs`, closeWaitMs);
  if (typeof preparedStatements !== 'boolean') throw new TypeError(`${WHERE}: options.preparedStatements: expected a boolean, got ${describe(preparedStatements)}`);
  return {
    pool: pool as PgPool,
    schema,
    instanceId: instanceId ?? `${hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`,
    timeoutMs: timeoutMs as number,
    intentTimeoutMs: intentTimeoutMs as number,
    closeWaitMs: closeWaitMs as number,
    preparedStatements,
  };
}
