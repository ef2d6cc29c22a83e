/**
 * Where the server keeps its history: a file `Ledger` in `--data` (one instance, or a fleet with
 * sticky sessions), or, with `--postgres`, a `PgLedger` every instance shares, so the next turn's
 * prompt holds what a stop on another instance recorded. The server creates the pg pool from the
 * URL and ends it after the ledger closes: the library takes a pool, never a URL. `pg` is an
 * optional peer dependency, so it (and `fullstop/postgres`) is imported only here, only with
 * `--postgres`.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, type LedgerStore } from '../../src/index.js';
import { redact, type ServerOptions } from './options.js';

/** The history store, what the startup line says of it, and how to close it (the store, then its pool). */
export interface History {
  ledger: LedgerStore;
  description: string;
  close(): Promise<void>;
}

/** Opens the history the flags ask for. */
export async function openHistory(options: ServerOptions): Promise<History> {
  if (options.postgres !== undefined) return openPostgres(options.postgres, options.pgSchema, options.nodeId);
  const dataDir = options.data ?? mkdtempSync(join(tmpdir(), 'fullstop-agent-server-'));
  mkdirSync(dataDir, { recursive: true });
  const ledger = await Ledger.open(join(dataDir, 'history.jsonl'));
  return { ledger, description: `ledger ${ledger.path}`, close: () => ledger.close() };
}

async function openPostgres(url: string, schema: string | undefined, nodeId: string): Promise<History> {
  const { default: pg } = await import('pg');
  const { PgLedger } = await import('../../src/ledger/postgres/index.js');
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // An idle client's error (the server restarted) must not end the process: the ledger's next
  // query gets a fresh connection, and a stop is never held by a sick database (PgLedger's bounds).
  pool.on('error', (error: Error) => { console.error(`agent-server: postgres: ${error.message}`); });
  try {
    // instanceId: restart repair closes this instance's unfinished turns, so it must survive a
    // restart: the node id, which an operator keeps per instance.
    const ledger = await PgLedger.open({ pool, instanceId: nodeId, ...(schema === undefined ? {} : { schema }) });
    return {
      ledger,
      description: `history in ${redact(url)}${schema === undefined ? '' : ` schema ${schema}`}`,
      async close() {
        try {
          await ledger.close();
        } finally {
          await pool.end();
        }
      },
    };
  } catch (error) {
    await pool.end();
    throw error;
  }
}
