/**
 * A PostgreSQL schema of its own per test file on the shared server (the server processes of a
 * file share it across its tests, so test/support/pg.ts's per-test scene does not fit), and its
 * removal afterwards (never another file's: each name is random).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PG } from '../support/pg.js';

/** The `--postgres` URL the servers get: the machine's PostgreSQL (test/support/pg.ts). */
export const POSTGRES_URL = process.env.POSTGRES_URL ?? `postgres://${PG.user}@${PG.host}:${PG.port}/${PG.database}`;

export function uniqueSchema(what: string): string {
  return `fullstop_test_${what}_${randomBytes(4).toString('hex')}`;
}

/** Runs `sql` on a short-lived connection. */
async function query<T extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

export async function dropSchema(schema: string): Promise<void> {
  await query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

export async function schemaExists(schema: string): Promise<boolean> {
  return (await query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema])).length > 0;
}
