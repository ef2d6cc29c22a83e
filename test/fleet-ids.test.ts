/**
 * Ids and keys: every session and turn id maps to keys of its own, even ids that are not
 * well-formed UTF-16 (a string cut in the middle of an emoji), which Redis would otherwise store
 * as the same UTF-8. On the shared Redis, under a key prefix of its own.
 */
import { describe, expect, it } from 'vitest';
import { keysUnder, redisReachable, REDIS_PORT } from './fixtures/fleet/support.js';
import { held } from './fixtures/fleet/scene.js';
import { redisScene } from './fixtures/fleet/backends.js';
import { clusterRootNodes } from '../dist/src/fleet/index.js';
import { fleetKeys } from '../dist/src/fleet/keys.js';
import { fromWire, toWire } from '../dist/src/fleet/wire-id.js';

const up = await redisReachable();
if (!up) console.warn(`fleet-ids tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

// Two ids cut mid-emoji: each ends in a different lone high surrogate.
const A = 'chat-😀 hello'.slice(0, 6);
const B = 'chat-🤖 hello'.slice(0, 6);

describe.skipIf(!up)('fleet ids', () => {
  const current = redisScene();

  it('two session ids cut mid-emoji get keys of their own: both run at once, and a stop of one never touches the other', async () => {
    expect(A).not.toBe(B);
    expect(Buffer.from(A).equals(Buffer.from(B))).toBe(true); // what Redis would see without escaping
    const a = await current.scene.instance('A');
    const b = await current.scene.instance('B');
    const ha = held();
    const hb = held();
    const runA = a.fleet.run(A, ha.body, { turnId: 't1' });
    const runB = a.fleet.run(B, hb.body, { turnId: 't2' });
    const [turnA, turnB] = await Promise.all([ha.started, hb.started]);
    const keys = await keysUnder(current.raw, current.scene.prefix);
    expect(keys.filter((k) => k.endsWith(':turns'))).toHaveLength(2);

    const answer = await b.fleet.stop(A, { timeoutMs: 5000 });
    expect(answer).toMatchObject({ outcome: 'stopped', sessionId: A, turnId: 't1' });
    expect(answer.outcome === 'stopped' && answer.report.sessionId).toBe(A);
    expect(turnA.signal.aborted).toBe(true);
    expect(turnB.signal.aborted).toBe(false);
    expect(await b.fleet.turn(A)).toMatchObject({ sessionId: A, status: 'cancelled' });
    expect(await b.fleet.turn(B)).toMatchObject({ sessionId: B, turnId: 't2', status: 'running', stopRequested: false });
    hb.release();
    expect(await runA).toMatchObject({ status: 'cancelled' });
    expect(await runB).toMatchObject({ status: 'completed' });
    expect(await b.fleet.turn(B)).toMatchObject({ sessionId: B, status: 'completed' });
  });

  it('two turn ids cut mid-emoji in one session are two turns, and ids holding % { } round-trip exactly', async () => {
    const a = await current.scene.instance('A');
    const b = await current.scene.instance('B');
    expect(await a.fleet.run('s1', async () => 1, { turnId: A })).toMatchObject({ status: 'completed', turnId: A });
    expect(await a.fleet.run('s1', async () => 2, { turnId: B })).toMatchObject({ status: 'completed', turnId: B });
    expect(await b.fleet.stop('s1', { turnId: A })).toEqual({ outcome: 'already_finished', sessionId: 's1', turnId: A, status: 'completed' });
    expect(await b.fleet.turn('s1')).toMatchObject({ turnId: B, epoch: 2 });
    for (const id of ['50%25', '50%', '%u00E9', '{x}', '\udc00z']) {
      const h = held();
      const run = a.fleet.run(id, h.body, { turnId: `t${id}` });
      await h.started;
      expect(await b.fleet.turn(id)).toMatchObject({ sessionId: id, turnId: `t${id}`, status: 'running' });
      expect(await b.fleet.stop(id, { turnId: `t${id}`, timeoutMs: 5000 })).toMatchObject({ outcome: 'stopped', sessionId: id, turnId: `t${id}` });
      expect(await run).toMatchObject({ status: 'cancelled', turnId: `t${id}` });
    }
  });

  it('refuses a node id, prefix or stop reason that is not well-formed with a TypeError naming it', async () => {
    const a = await current.scene.instance('A');
    await expect(current.scene.instance(`N${A}`)).rejects.toThrow(/options.nodeId: expected a well-formed string/);
    await expect(current.scene.instance('P', { prefix: A })).rejects.toThrow(/options.prefix: expected a well-formed string/);
    await expect(a.fleet.stop('s1', { reason: A })).rejects.toThrow(/options.reason: expected a well-formed string/);
    expect(await keysUnder(current.raw, current.scene.prefix)).toEqual([]);
  });
});

describe('clusterRootNodes', () => {
  it('parses host:port lists (IPv6 in brackets) and refuses anything else with a RangeError naming the flag', () => {
    expect(clusterRootNodes('127.0.0.1:7100, [::1]:7101,redis-a:6379', '--redis-cluster')).toEqual([
      { socket: { host: '127.0.0.1', port: 7100 } }, { socket: { host: '::1', port: 7101 } }, { socket: { host: 'redis-a', port: 6379 } },
    ]);
    for (const bad of ['', ' , ', 'x', 'h:0', 'h:65536', ':1', 'h:1:2', 'redis://h:1']) {
      expect(() => clusterRootNodes(bad, '--redis-cluster')).toThrow(RangeError);
      expect(() => clusterRootNodes(bad, '--redis-cluster')).toThrow(/^--redis-cluster: expected/);
    }
    expect(() => clusterRootNodes(7 as never)).toThrow(TypeError);
  });
});

describe('the wire form of ids', () => {
  it('is well-formed, round-trips, and gives distinct keys to distinct ids (20,000 random ids over the escape characters)', () => {
    const alphabet = ['a', '%', '{', '}', 'u', '2', '5', 'D', '8', '7B', '\ud83d', '\ude00', '\udbff', '😀'];
    const ids = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      let id = '';
      for (let n = 1 + Math.floor(Math.random() * 6); n > 0; n--) id += alphabet[Math.floor(Math.random() * alphabet.length)];
      ids.add(id);
    }
    const keys = fleetKeys('p');
    const wires = new Set<string>();
    const turnKeys = new Set<string>();
    for (const id of ids) {
      const wire = toWire(id);
      expect(wire.isWellFormed()).toBe(true);
      expect(fromWire(wire)).toBe(id);
      expect(keys.turns(id).isWellFormed()).toBe(true);
      wires.add(Buffer.from(wire).toString('hex'));
      turnKeys.add(Buffer.from(keys.turns(id)).toString('hex'));
    }
    // As UTF-8 bytes (what Redis stores): as many distinct wire forms and keys as ids.
    expect(wires.size).toBe(ids.size);
    expect(turnKeys.size).toBe(ids.size);
    expect(toWire('plain-id:42 😀')).toBe('plain-id:42 😀');
  });
});
