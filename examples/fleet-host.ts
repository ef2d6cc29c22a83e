/**
 * One server instance in its own process, for the fleet demo (`npm start -- --fleet`) and the
 * fleet bench: a Redis client, a TurnRunner (with a Ledger when asked) and a Fleet, driven by its
 * parent over IPC.
 *
 * Parent → host: `{ cmd: 'run', sessionId, turnId? }` runs a turn that says a line, then runs a
 * tool that waits until the turn is stopped; `{ cmd: 'close' }` leaves the fleet and exits.
 * Host → parent: `ready`, `started`, `aborted` (the turn's signal fired), `turn_aborted` (with
 * the StopReport), `outcome`, `closed`. Times are `at`: ms since the Unix epoch, sub-ms precise
 * (performance.timeOrigin + performance.now()), comparable across processes on one machine.
 *
 * Config: argv[2] is JSON `{ prefix, nodeId, port?, leaseMs?, renewMs?, sweepMs?, ledger?, reconnectMs?, graceMs?, pgSchema? }`:
 * `ledger` a file ledger's path, or `pgSchema` a `PgLedger` in that schema of the PostgreSQL the
 * `PG*` variables name (else 127.0.0.1:5432, user postgres, database test), owned by `nodeId`.
 */
import { createClient } from 'redis';
import { Ledger, TurnRegistry, TurnRunner } from '../src/index.js';
import { Fleet } from '../src/fleet/index.js';
import type { LedgerStore } from '../src/ledger/store.js';

interface HostConfig {
  prefix: string; nodeId: string; port?: number; leaseMs?: number; renewMs?: number; sweepMs?: number;
  ledger?: string; reconnectMs?: number; graceMs?: number; pgSchema?: string;
}

const config = JSON.parse(process.argv[2] ?? '{}') as HostConfig;
const now = () => performance.timeOrigin + performance.now();
const send = (message: Record<string, unknown>) => process.send?.(message);

const redis = createClient({
  socket: { host: '127.0.0.1', port: config.port ?? 6379, connectTimeout: 1000, reconnectStrategy: () => config.reconnectMs ?? 100 },
});
redis.on('error', () => { /* reconnects by itself; the fleet answers relay_unavailable meanwhile */ });
await redis.connect();
const pgPool = config.pgSchema === undefined ? undefined : new (await import('pg')).default.Pool({
  host: process.env.PGHOST ?? '127.0.0.1', user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'test',
});
const ledger: LedgerStore | undefined = pgPool !== undefined
  ? await (await import('../src/ledger/postgres/index.js')).PgLedger.open({ pool: pgPool, schema: config.pgSchema, instanceId: config.nodeId })
  : config.ledger === undefined ? undefined : await Ledger.open(config.ledger);
const runner = new TurnRunner({ ledger, registry: new TurnRegistry(), graceMs: config.graceMs });
runner.on('turn_aborted', ({ sessionId, turnId, report }) => send({ type: 'turn_aborted', sessionId, turnId, report, at: now() }));
const fleet = await Fleet.start({
  redis, runner, nodeId: config.nodeId, prefix: config.prefix,
  leaseMs: config.leaseMs, renewMs: config.renewMs, sweepMs: config.sweepMs,
});

async function runTurn(sessionId: string, turnId: string | undefined): Promise<void> {
  const outcome = await fleet.run(sessionId, async (turn) => {
    await turn.say('Working on it…');
    return turn.tool('wait_for_stop', {}, (token) => new Promise<string>((resolve) => {
      token.signal.addEventListener('abort', () => { send({ type: 'aborted', sessionId, at: now() }); resolve('stopped'); }, { once: true });
      send({ type: 'started', sessionId, turnId: turn.turnId, at: now() });
    }));
  }, { turnId });
  send({ type: 'outcome', sessionId, status: outcome.status, turnId: outcome.turnId, epoch: outcome.epoch, report: outcome.status === 'cancelled' ? outcome.report : undefined, at: now() });
}

process.on('message', (message: { cmd: string; sessionId?: string; turnId?: string }) => {
  if (message.cmd === 'run') {
    runTurn(message.sessionId!, message.turnId).catch((error: unknown) => send({ type: 'error', message: String(error) }));
  } else if (message.cmd === 'close') {
    void (async () => {
      await fleet.close();
      await ledger?.close();
      await pgPool?.end();
      redis.destroy();
      send({ type: 'closed' });
      process.disconnect();
    })();
  }
});

send({ type: 'ready', nodeId: fleet.nodeId, subscriberName: fleet.subscriberName, pid: process.pid, at: now() });
