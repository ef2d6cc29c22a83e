/**
 * The part of a node-postgres pool `PgLedger` uses, as structural types (a `pg.Pool` of `pg` 8
 * fits), and the one way it talks to it: `withClient`, which bounds every wait on the database by
 * the ledger's own timeout, whatever timeouts the caller's pool has (maybe none).
 *
 * Nothing here imports `pg`: `fullstop/postgres` only ever uses the pool its caller gave it.
 */

import { LedgerTimeoutError } from '../../errors.js';
import { within } from '../../base/within.js';

/** One query as `pg` takes it (`query_timeout`: `pg`'s read timeout for this query, in ms). */
export interface PgQuery {
  /** A prepared statement's name: `pg` prepares it on each connection once, then only binds and runs it. */
  name?: string;
  text: string;
  values?: unknown[];
  query_timeout?: number;
}

/** A client checked out of the pool (`pg.PoolClient`). */
export interface PgPoolClient {
  query(query: PgQuery): Promise<{ rows: any[] }>;
  /** Returns the client; with an Error (or `true`) the pool destroys it instead of keeping it. */
  release(destroy?: Error | boolean): void;
  /** A checked-out client's connection errors are its user's to handle (the pool listens only to idle ones). */
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
}

/** What `PgLedger` needs of a pool: a `pg.Pool` (node-postgres 8) fits. The caller owns it. */
export interface PgPool {
  connect(): Promise<PgPoolClient>;
}

/**
 * Why a call failed, for the retry rule of group-commit.ts: `before` — nothing reached the
 * database (no client, or the server answered with an error, which rolls the transaction back);
 * `inDoubt` — the statement may have run and committed, and its answer was lost.
 */
export type FailureKind = 'before' | 'inDoubt';

/** A failed call and whether what it sent may have committed. */
export class PgCallError extends Error {
  readonly kind: FailureKind;
  constructor(message: string, kind: FailureKind, cause: unknown) {
    super(message, { cause });
    this.kind = kind;
  }
}

/** What a caller is told of `error`: the `LedgerTimeoutError` when it timed out, else `error` itself. */
export function reported(error: unknown): unknown {
  return error instanceof PgCallError && error.cause instanceof LedgerTimeoutError ? error.cause : error;
}

/**
 * True for an error the server sent about the statement (an ErrorResponse: it has a SQLSTATE
 * `code` and a `severity`), which rolls it back and leaves the session usable. A FATAL or PANIC
 * one (an administrator's `pg_terminate_backend`, a shutdown, a failover) ends the session
 * instead: it is a connection failure, whose client is destroyed and whose statement may have
 * committed just before (`inDoubt`: re-sent, written once).
 */
function fromServer(error: unknown): boolean {
  const severity = (error as { severity?: unknown })?.severity;
  return typeof severity === 'string' && severity !== 'FATAL' && severity !== 'PANIC' && typeof (error as { code?: unknown }).code === 'string';
}

/**
 * Runs `use` on a client of `pool`, all within `timeoutMs`: the checkout is raced with a timer (a
 * client that arrives late is destroyed), every query gets the time left as `query_timeout`, and a
 * client whose query failed for any reason but a server's answer is destroyed, not reused (after a
 * read timeout its connection may still carry the late answer; `pg` ends such a client by
 * destroying its socket). Rejects with a `PgCallError`.
 */
export async function withClient<T>(pool: PgPool, where: string, timeoutMs: number,
  use: (query: (text: string, values?: unknown[], name?: string) => Promise<any[]>) => Promise<T>): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  const client = await checkout(pool, where, timeoutMs);
  let broken: Error | undefined;
  // Unheard, an 'error' of a checked-out client (its connection reset) would be an uncaught exception.
  const onError = (error: Error) => { broken ??= error; };
  client.on('error', onError);
  const query = async (text: string, values?: unknown[], name?: string): Promise<any[]> => {
    const left = Math.max(1, Math.ceil(deadline - performance.now()));
    try {
      return (await client.query({ ...(name === undefined ? {} : { name }), text, values, query_timeout: left })).rows;
    } catch (error) {
      if (fromServer(error)) throw new PgCallError(`${where}: the database refused it: ${(error as Error).message}`, 'before', error);
      broken = error instanceof Error ? error : new Error(String(error));
      // pg's own read timeout (`query_timeout`); a server's FATAL may say "timeout" too (idle-session timeout), but it answered.
      const timedOut = (error as { severity?: unknown }).severity === undefined && /timeout/i.test(broken.message);
      const cause = timedOut ? new LedgerTimeoutError(`${where}: no answer from the database within ${timeoutMs} ms (timeoutMs)`, { cause: error }) : error;
      throw new PgCallError(timedOut ? (cause as Error).message : `${where}: the connection failed: ${broken.message}`, 'inDoubt', cause);
    }
  };
  try {
    return await use(query);
  } finally {
    client.off('error', onError);
    client.release(broken ?? undefined);
  }
}

/** A client of `pool` within `timeoutMs`; one that arrives after it is destroyed. */
async function checkout(pool: PgPool, where: string, timeoutMs: number): Promise<PgPoolClient> {
  const connecting = pool.connect();
  try {
    return await within(connecting, timeoutMs, () => {
      connecting.then((client) => client.release(true), () => {});
      throw new PgCallError(`${where}: no connection to the database within ${timeoutMs} ms (timeoutMs)`, 'before',
        new LedgerTimeoutError(`${where}: no connection within ${timeoutMs} ms`));
    });
  } catch (error) {
    if (error instanceof PgCallError) throw error;
    throw new PgCallError(`${where}: cannot connect to the database: ${(error as Error)?.message ?? String(error)}`, 'before', error);
  }
}
