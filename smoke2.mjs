import pg from 'pg';
import { PgLedger } from './dist/src/ledger/postgres/index.js';
const pool = new pg.Pool({ host: '127.0.0.1', user: 'postgres', database: 'test' });
const schema = 'smoke2_' + process.pid;
try {
  const a = await PgLedger.open({ pool, schema, instanceId: 'A', timeoutMs: 600 });
  console.log('opened');
  const t = setTimeout(() => console.log('still pending'), 2000);
  await a.append({ sessionId: 's', turnId: 't1', type: 'turn_started', input: 'hi' });
  clearTimeout(t);
  console.log('appended');
  await a.close();
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
}
