/**
 * `npm start -- --fleet`: a Stop posted on one server instance stops the turn running on another.
 *
 * Instance A runs in a child process (examples/fleet-host.ts) with its own Ledger; instance B is
 * this process. A runs a turn; B, whose runner has never heard of it, calls `fleet.stop(session)`.
 * The demo prints the timeline across both processes, B's answer, the Redis record and A's ledger.
 * Needs Redis at 127.0.0.1:6379 (REDIS_PORT to change the port); without it, it says how to start
 * one and exits 1.
 *
 * Flags: --json (one machine-readable report on stdout).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import { TurnRegistry, TurnRunner } from '../src/index.js';
import { Fleet } from '../src/fleet/index.js';
import { FleetHostProcess, redisAnswers } from './fleet-process.js';

const now = () => performance.timeOrigin + performance.now();

export async function runFleetDemo(args: readonly string[]): Promise<number> {
  const json = args.includes('--json');
  const unknown = args.filter((a) => a !== '--json');
  if (unknown.length > 0) {
    console.error(`demo --fleet: unknown argument ${unknown[0]}\nusage: npm start -- --fleet [--json]`);
    return 2;
  }
  const port = Number(process.env.REDIS_PORT ?? 6379);
  if (!(await redisAnswers(port))) {
    console.error([
      `demo --fleet: no Redis at 127.0.0.1:${port}. The fleet demo needs one; start it with`,
      `  redis-server --port ${port} --save '' --appendonly no --daemonize yes`,
      `or  docker run --rm -d -p ${port}:6379 redis:7`,
      'then run `npm start -- --fleet` again.',
    ].join('\n'));
    return 1;
  }
  const say = (line: string) => { if (!json) console.log(line); };
  const prefix = `fullstop-demo:${process.pid}:${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'fullstop-fleet-demo-'));
  const ledgerPath = join(dir, 'instance-a.jsonl');
  const redis = createClient({ socket: { host: '127.0.0.1', port } });
  redis.on('error', () => {});
  await redis.connect();
  const fleetB = await Fleet.start({ redis, runner: new TurnRunner({ registry: new TurnRegistry() }), nodeId: 'instance-b', prefix });
  const a = new FleetHostProcess({ prefix, nodeId: 'instance-a', port, ledger: ledgerPath });
  try {
    await a.next((m) => m.type === 'ready');
    say(`instance-a: pid ${a.child.pid}, instance-b: pid ${process.pid} (this one); one Redis, prefix ${prefix}`);
    a.send({ cmd: 'run', sessionId: 'demo', turnId: 'turn-1' });
    const started = await a.next((m) => m.type === 'started');
    const record = await fleetB.turn('demo');
    say(`instance-a runs ${record?.turnId} (epoch ${record?.epoch}); instance-b's own runner has no turn: ${fleetB.nodeId} sends the stop\n`);

    const sentAt = now();
    const answer = await fleetB.stop('demo', { timeoutMs: 5000 });
    const answeredAt = now();
    const aborted = await a.next((m) => m.type === 'aborted');
    const turnAborted = await a.next((m) => m.type === 'turn_aborted');
    const outcome = await a.next((m) => m.type === 'outcome');
    const timeline = [
      { ms: 0, what: 'instance-b: fleet.stop("demo") — recorded in Redis (cancelling) and published' },
      { ms: aborted.at - sentAt, what: 'instance-a: the turn\'s token.signal aborted (tool unwinds)' },
      { ms: turnAborted.at - sentAt, what: `instance-a: turn_aborted emitted (its stop sequence: ${turnAborted.report.emittedAt.toFixed(2)} ms)` },
      { ms: answeredAt - sentAt, what: `instance-b: answer "${answer.outcome}" with instance-a's StopReport` },
      { ms: outcome.at - sentAt, what: `instance-a: fleet.run resolved "${outcome.status}", terminal status recorded` },
    ].sort((x, y) => x.ms - y.ms);
    say('timeline (ms since instance-b sent the stop; the two processes share one clock):');
    for (const t of timeline) say(`  +${t.ms.toFixed(2).padStart(7)} ms  ${t.what}`);
    const after = await fleetB.turn('demo');
    say(`\nRedis record: ${JSON.stringify({ turnId: after?.turnId, epoch: after?.epoch, node: after?.node, status: after?.status, reason: after?.reason, requester: after?.requester })}`);
    const again = await fleetB.stop('demo');
    say(`a second stop answers: ${again.outcome}${'status' in again ? ` (${again.status})` : ''}`);

    await a.close();
    const history = readFileSync(ledgerPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    say('\ninstance-a\'s ledger:');
    for (const e of history) say(`  ${String(e.seq).padStart(2)} ${e.type}${e.status ? ` ${e.status}` : ''}${e.reason ? ` (${e.reason})` : ''}`);
    if (json) {
      console.log(JSON.stringify({
        answer: { ...answer, error: undefined }, startedAt: started.at, timeline, record: after, secondStop: again.outcome,
        ledger: history.map((e) => (e.type === 'status' ? `status:${String(e.status)}` : e.type)),
      }));
    }
    return answer.outcome === 'stopped' && outcome.status === 'cancelled' ? 0 : 1;
  } finally {
    await a.close();
    await fleetB.close();
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await redis.sendCommand(['SCAN', cursor, 'MATCH', `${prefix}:*`, 'COUNT', '1000']) as [string, string[]];
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
    if (keys.length > 0) await redis.sendCommand(['DEL', ...keys]);
    redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}
