/**
 * One server instance for F7 (bench/fleet-cluster.bench.ts), in its own process: a node-redis
 * client (single-node or cluster) whose commands it counts, a TurnRunner and a Fleet, driven by
 * its parent over IPC.
 *
 * Parent → instance: `{ cmd: 'run', sessions }` starts a turn in each (each lasts until stopped)
 * and answers `running`; `{ cmd: 'stop', id, sessionId }` sends `fleet.stop` and answers
 * `answer`; `{ cmd: 'count' }` answers `count` (commands sent so far); `{ cmd: 'close' }`.
 * Instance → parent: `ready`, `aborted` (an owned turn's `turn_aborted`, with `at`: ms since the
 * Unix epoch, sub-ms, comparable across processes on one machine).
 */
import { createClient, createCluster } from 'redis';
import { TurnRegistry, TurnRunner } from '../src/index.js';
import { Fleet, type FleetRedisClient } from '../src/fleet/index.js';

interface Config { prefix: string; nodeId: string; ports: number[]; cluster: boolean }

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
const now = () => performance.timeOrigin + performance.now();
const send = (message: Record<string, unknown>) => process.send?.(message);

const redis = (config.cluster
  ? createCluster({ rootNodes: config.ports.map((port) => ({ socket: { host: '127.0.0.1', port } })) })
  : createClient({ socket: { host: '127.0.0.1', port: config.ports[0] } })) as unknown as FleetRedisClient & { sendCommand: (...a: any[]) => Promise<unknown> };
redis.on('error', () => {});
await redis.connect();
// Every command the fleet sends on its client (the subscriber is a duplicate, not counted).
let commands = 0;
const sendCommand = redis.sendCommand.bind(redis);
redis.sendCommand = (...args: any[]) => { commands++; return sendCommand(...args); };

const runner = new TurnRunner({ registry: new TurnRegistry({ slots: 4096 }) });
runner.on('turn_aborted', ({ sessionId }) => send({ type: 'aborted', sessionId, at: now() }));
const fleet = await Fleet.start({ redis, runner, nodeId: config.nodeId, prefix: config.prefix, leaseMs: 180_000, commandTimeoutMs: 10_000 });
const running: Promise<unknown>[] = [];

process.on('message', (m: { cmd: string; id?: number; sessionId?: string; sessions?: string[] }) => {
  if (m.cmd === 'run') {
    const start = (s: string) => new Promise<void>((ok, fail) => {
      running.push(fleet.run(s, (turn) => new Promise((end) => { ok(); turn.signal.addEventListener('abort', () => end(0), { once: true }); })).catch(fail));
    });
    // A hundred registrations at a time: the figure is the stop's, not a registration storm's.
    void (async () => {
      const sessions = m.sessions!;
      for (let i = 0; i < sessions.length; i += 100) await Promise.all(sessions.slice(i, i + 100).map(start));
    })().then(() => send({ type: 'running' }), (e: Error) => send({ type: 'error', message: e.message }));
  } else if (m.cmd === 'stop') {
    void fleet.stop(m.sessionId!, { timeoutMs: 10_000 }).then((a) => send({ type: 'answer', id: m.id, outcome: a.outcome }));
  } else if (m.cmd === 'count') {
    send({ type: 'count', commands });
  } else if (m.cmd === 'close') {
    void (async () => {
      await runner.shutdown({ deadlineMs: 5000 });
      await Promise.allSettled(running);
      await fleet.close();
      redis.destroy();
      send({ type: 'closed' });
      process.disconnect();
    })();
  }
});
send({ type: 'ready' });
