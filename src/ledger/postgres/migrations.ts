/**
 * Creates the schema's tables, indexes and function when missing. Every statement is idempotent
 * (`if not exists`, `or replace`), and they run in one transaction under an advisory lock keyed
 * by the schema, so instances opening at once take turns: without the lock two concurrent
 * `CREATE … IF NOT EXISTS` of one object can both find it missing and one fails on the catalog's
 * unique index. The whole migration is bounded by the ledger's `timeoutMs`.
 */

import { withClient, type PgPool } from './pool.js';
import type { Statements } from './statements.js';

export async function migrate(pool: PgPool, statements: Statements, timeoutMs: number): Promise<void> {
  await withClient(pool, 'PgLedger.open', timeoutMs, async (query) => {
    await query('BEGIN');
    try {
      await query(statements.migrationLock, [`fullstop.migrate:${statements.schema}`]);
      for (const statement of statements.migration) await query(statement);
      await query('COMMIT');
    } catch (error) {
      // A client whose query failed at the server is kept by the pool: leave it outside a transaction.
      await query('ROLLBACK').catch(() => {});
      throw error;
    }
  });
}
