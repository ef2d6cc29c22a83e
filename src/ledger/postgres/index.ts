/**
 * `fullstop/postgres`: the history on PostgreSQL that every instance shares (`PgLedger`, a
 * `LedgerStore`), on node-postgres (`pg` 8, an optional peer dependency: only this entry point
 * needs it, and it only uses the pool it is given). See docs/postgres.md.
 */

export { PgLedger } from './pg-ledger.js';
export type { PgLedgerOptions } from './options.js';
export type { PgPool, PgPoolClient, PgQuery } from './pool.js';
