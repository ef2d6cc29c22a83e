/**
 * Brings a schema to `SCHEMA_VERSION` (statements.ts). Invariants:
 * 1. A schema already current is left alone: `open` reads `meta.version` (no lock an append
 *    takes is ever waited for) and runs nothing more.
 * 2. Otherwise the migration runs in one transaction under an advisory lock keyed by the schema,
 *    so instances opening at once take turns (two concurrent `CREATE … IF NOT EXISTS` of one
 *    object can both find it missing, and one fails on the catalog's unique index); it checks
 *    the version again under the lock.
 * 3. It never waits on a lock while instances append: every lock wait of the transaction ends at
 *    `lock_timeout` (the time left, at most `MIGRATION_LOCK_MS`), and the tables and indexes are
 *    created only on a schema without `entries` (a `CREATE INDEX IF NOT EXISTS` on a table in use
 *    would queue every append behind it). An older schema gets `meta`, the new functions and
 *    `turns`' fillfactor (SHARE UPDATE EXCLUSIVE, which no append's lock conflicts with; skipped
 *    when a VACUUM holds it) only: one of the first release (no `meta`) a `seq_offset` that keeps
 *    every new `seq` above its highest one, one of version 2 or 3 keeps its recorded `seq_offset`
 *    (baked into the function). Its id columns keep their collation (changing it rewrites them).
 */

import { withClient, type PgPool } from './pool.js';
import { SCHEMA_VERSION, type Statements } from './statements.js';

type Query = (text: string, values?: unknown[]) => Promise<any[]>;

/** The longest a migration waits for one lock, in ms (then `open` fails naming it, and can be retried). */
export const MIGRATION_LOCK_MS = 2000;

export async function migrate(pool: PgPool, statements: Statements, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  await withClient(pool, 'PgLedger.open', timeoutMs, async (query) => {
    if (await currentVersion(query, statements) >= SCHEMA_VERSION) return;
    await query('BEGIN');
    try {
      const lockMs = Math.max(1, Math.min(MIGRATION_LOCK_MS, Math.floor((deadline - performance.now()) * 0.8)));
      await query(`SET LOCAL lock_timeout = ${lockMs}`);
      await query(statements.migrationLock, [`fullstop.migrate:${statements.schema}`]);
      const version = await currentVersion(query, statements);
      if (version < SCHEMA_VERSION) {
        const [{ present }] = await query(statements.hasTables);
        if (!present) for (const statement of statements.tables) await query(statement);
        const offset = await seqOffset(query, statements, version);
        for (const statement of statements.upgrade(offset)) await query(statement);
        await query(statements.recordVersion, [String(offset)]);
      }
      await query('COMMIT');
    } catch (error) {
      // A client whose query failed at the server is kept by the pool: leave it outside a transaction.
      await query('ROLLBACK').catch(() => {});
      throw error;
    }
  });
}

/**
 * The schema's `seq_offset`: the recorded one from version 2 on (kept: readers' safe horizon and
 * every seq written rest on it), else one above every seq it holds (none, or a first-release schema).
 */
async function seqOffset(query: Query, statements: Statements, version: number): Promise<bigint> {
  const recorded = version >= 2 ? await query(statements.recordedOffset) : [];
  const [{ offset }] = recorded.length > 0 ? recorded : await query(statements.newOffset);
  return BigInt(offset);
}

/** The schema's recorded version; 0 for none (no schema, or one of the first release: no `meta`). */
async function currentVersion(query: Query, statements: Statements): Promise<number> {
  const [{ present }] = await query(`SELECT to_regclass('${statements.schema}.meta') IS NOT NULL AS present`);
  if (!present) return 0;
  const rows = await query(statements.version);
  return rows.length === 0 ? 0 : Number(rows[0].value);
}
