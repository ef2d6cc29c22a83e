/**
 * Fleet answers (`fleet.answer`), on one Redis and on Redis Cluster: a question asked in a turn on
 * instance A is answered through B (the body gets the answer), claim-once fleet-wide even when two
 * instances answer at once, `not_found` once its turn is stopped or over, `relay_unavailable`
 * without Redis; and the question's record is gone with its turn.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backendScene, backends } from './fixtures/fleet/backends.js';
import { client, clientIdByName, dropKeys, RedisProxy, redisReachable, uniquePrefix, type Client } from './fixtures/fleet/support.js';
import { asking, eventually as waitFor, FleetScene, held } from './fixtures/fleet/scene.js';
import type { Instance } from './fixtures/fleet/scene.js';
import type { Turn } from '../dist/src/index.js';
import { Fleet, type FleetOutcome } from '../dist/src/fleet/index.js';

for (const backend of await backends('fleet-answers')) {
  describe.skipIf(!backend.up)(`fleet answers, on ${backend.name}`, () => {
    const current = backendScene(backend);
    const questionKeys = async () => (await backend.keys(current.scene.prefix)).filter((k) => k.endsWith(':question'));

    /** Runs a turn of `s1` on `owner` that asks one question; resolves once the question's record is in Redis. */
    async function askedOn(owner: Instance, turnId: string): Promise<{ run: Promise<FleetOutcome<unknown>>; questionId: string }> {
      const q = asking(owner);
      const run = owner.fleet.run('s1', q.body, { turnId });
      const questionId = await q.asked;
      // The record is written before the event (an earlier question's record stays, ended, for leaseMs: look for this one's).
      expect((await questionKeys()).some((k) => k.includes(questionId))).toBe(true);
      return { run, questionId };
    }

    it('a question asked on A is answered through B: accepted with A\'s node, the body gets the answer; after its turn, and for an id never asked, not_found', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      const { run, questionId } = await askedOn(a, 't1');
      expect(await b.fleet.answer(questionId, { colour: 'blue' }, { timeoutMs: 5000 })).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
      expect(await run).toMatchObject({ status: 'completed', value: { colour: 'blue' } });
      // Its record stays, ended, for leaseMs: an answer whose confirmation was lost still learns it was accepted.
      expect(await questionKeys()).toHaveLength(1);
      expect(await b.fleet.answer(questionId, 'late')).toEqual({ outcome: 'not_found', questionId });
      expect(await b.fleet.answer('q-never-asked', 'x')).toEqual({ outcome: 'not_found', questionId: 'q-never-asked' });
    });

    it('an answer sent through another instance the moment the question event fires is accepted: the record is in Redis before the event', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      let reply: Promise<unknown> | undefined;
      // A client that answers as soon as it is told (through B, as a balancer may send it).
      const onQuestion = ({ questionId }: { questionId: string }) => { reply = b.fleet.answer(questionId, 'fast', { timeoutMs: 5000 }); };
      a.runner.on('question', onQuestion);
      const run = a.fleet.run('s1', (turn) => turn.ask({ text: 'Now?' }), { turnId: 't-fast' });
      await waitFor(async () => reply !== undefined, 5000, 'the question event');
      a.runner.off('question', onQuestion);
      expect(await reply).toMatchObject({ outcome: 'accepted', node: a.fleet.nodeId });
      expect(await run).toMatchObject({ status: 'completed', value: 'fast' });
    });

    it('two answers sent at once through two instances: exactly one accepted, the other already_answered, and the body gets the accepted one', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      const c = await current.scene.instance('C');
      for (let i = 0; i < 5; i++) {
        const { run, questionId } = await askedOn(a, `t${i}`);
        const [fromB, fromC] = await Promise.all([b.fleet.answer(questionId, `B${i}`, { timeoutMs: 5000 }), c.fleet.answer(questionId, `C${i}`, { timeoutMs: 5000 })]);
        const outcomes = [fromB.outcome, fromC.outcome].sort();
        expect(outcomes).toEqual(['accepted', 'already_answered']);
        const winner = fromB.outcome === 'accepted' ? `B${i}` : `C${i}`;
        expect(await run).toMatchObject({ status: 'completed', value: winner });
      }
    });

    it('a stopped turn\'s question answers not_found, and its record is gone', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      const { run, questionId } = await askedOn(a, 't1');
      expect(await b.fleet.stop('s1', { timeoutMs: 5000 })).toMatchObject({ outcome: 'stopped', turnId: 't1' });
      expect(await run).toMatchObject({ status: 'cancelled' });
      expect(await b.fleet.answer(questionId, 'too late', { timeoutMs: 5000 })).toEqual({ outcome: 'not_found', questionId });
      expect(await questionKeys()).toEqual([]);
    });

    it('an answer over maxAnswerBytes of JSON is refused with a RangeError naming answer before anything is claimed: the question stays open and takes a smaller one', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B', { maxAnswerBytes: 64 });
      const { run, questionId } = await askedOn(a, 't1');
      const record = async () => (await backend.keys(current.scene.prefix)).filter((k) => k.endsWith(':question'));
      // 65 bytes of JSON ('é' is two bytes of UTF-8, and the quotes two more): one over B's bound.
      await expect(b.fleet.answer(questionId, `${'é'.repeat(31)}x`)).rejects.toThrow(RangeError);
      await expect(b.fleet.answer(questionId, `${'é'.repeat(31)}x`)).rejects.toThrow(/^answer: .*64 bytes.*got 65/);
      // The default bound is 1 MiB (a 100 MB answer through Redis had the owner lose its lease).
      await expect(a.fleet.answer(questionId, 'x'.repeat(1_048_576))).rejects.toThrow(/^answer: at most 1048576 bytes/);
      expect(await record()).toHaveLength(1);
      // Exactly at the bound: taken.
      expect(await b.fleet.answer(questionId, 'é'.repeat(31), { timeoutMs: 5000 })).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
      expect(await run).toMatchObject({ status: 'completed', value: 'é'.repeat(31) });
      await expect(Fleet.start({ redis: a.redis, runner: a.runner, maxAnswerBytes: 0 })).rejects.toThrow(/options\.maxAnswerBytes/);
    });

    it('fleet.close() with an answer waiting for its owner: the answer has settled when close resolves (relay_unavailable, saying the fleet closed), and the question takes another answer', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      const c = await current.scene.instance('C');
      const { run, questionId } = await askedOn(a, 't1');
      // B closes while its answer is claimed (or being claimed) and not yet confirmed.
      let settled = false;
      const answering = b.fleet.answer(questionId, 'from B', { timeoutMs: 30_000 }).finally(() => { settled = true; });
      await b.fleet.close();
      expect(settled).toBe(true);
      const reply = await answering;
      expect(reply).toMatchObject({ outcome: expect.stringMatching(/^(relay_unavailable|accepted)$/), questionId });
      if (reply.outcome === 'relay_unavailable') {
        expect(reply.error.message).toMatch(/before the fleet closed/);
        expect(reply.error.message).not.toMatch(/within 30000 ms/);
      }
      if (reply.outcome === 'relay_unavailable' && /nothing was given/.test(reply.error.message)) {
        expect(await c.fleet.answer(questionId, 'from C', { timeoutMs: 5000 })).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
        expect(await run).toMatchObject({ status: 'completed', value: 'from C' });
      } else {
        // Accepted, or taken by the owner before the undo: the owner gives it.
        expect(await run).toMatchObject({ status: 'completed', value: 'from B' });
      }
    });

    it('answers relay_unavailable when Redis cannot be reached, and refuses bad arguments naming them before anything reaches Redis', async () => {
      const a = await current.scene.instance('A');
      // An instance whose client reaches nothing (port 1 on loopback refuses at once).
      const dead = await client(1, { connect: false });
      try {
        const d = await current.scene.instance('D', { redis: dead, commandTimeoutMs: 300 });
        const reply = await d.fleet.answer('q-1', 'x', { timeoutMs: 300 });
        expect(reply).toMatchObject({ outcome: 'relay_unavailable', questionId: 'q-1' });
        expect(reply.outcome === 'relay_unavailable' && reply.error.name).toBe('FleetUnavailableError');
      } finally {
        dead.destroy();
      }
      await expect(a.fleet.answer('x'.repeat(1025), 1)).rejects.toThrow(RangeError);
      await expect(a.fleet.answer('x'.repeat(1025), 1)).rejects.toThrow(/questionId/);
      await expect(a.fleet.answer('q', 1n)).rejects.toThrow(/answer/);
      await expect(a.fleet.answer('q', 1, { timeoutMs: -1 })).rejects.toThrow(/options\.timeoutMs/);
      expect(await backend.keys(current.scene.prefix)).toEqual([]);
    });
  });
}

describe.skipIf(!(await redisReachable()))('fleet answers when the owner\'s subscriber is down, on one Redis', () => {
  let scene: FleetScene;
  let raw: Client;
  let proxy: Awaited<ReturnType<typeof RedisProxy.start>>;
  let viaProxy: Client;

  beforeEach(async () => {
    scene = new FleetScene(uniquePrefix(), () => client());
    raw = await client();
    proxy = await RedisProxy.start();
    viaProxy = await client(proxy.port, { reconnectMs: 100 });
  });

  afterEach(async () => {
    try {
      await scene.cleanup();
    } finally {
      viaProxy.destroy();
      await proxy.close();
      await dropKeys(raw, scene.prefix);
      await raw.close();
    }
  });

  const viaRaw = (key: string) => raw.get(key);

  /**
   * Owner A (a lease of 60 s) runs a turn whose body asks a question (`wrap` may add to that body),
   * and the question's record is in Redis; B reaches Redis through the proxy.
   */
  async function askedOnA(wrap: (ask: (turn: Turn) => Promise<unknown>) => (turn: Turn) => Promise<unknown> = (ask) => ask) {
    const a = await scene.instance('A', { leaseMs: 60_000 });
    const q = asking(a);
    const run = a.fleet.run('s1', wrap(q.body), { turnId: 't1' });
    const questionId = await q.asked;
    const key = `${scene.prefix}:{q:${questionId}}:question`;
    await waitFor(async () => (await viaRaw(key)) !== null, 5000, 'the question record');
    return { a, run, questionId, key };
  }

  /** Owner A reaches Redis through the proxy, which keeps its subscriber down (closed at the handshake); its commands work. */
  async function ownerWithoutSubscriber(renewMs: number) {
    const a = await scene.instance('A', { redis: viaProxy, leaseMs: 60_000, renewMs });
    proxy.blockName = a.fleet.subscriberName;
    const id = await clientIdByName(raw, a.fleet.subscriberName);
    expect(await raw.sendCommand(['CLIENT', 'KILL', 'ID', id!])).toBe(1);
    const q = asking(a);
    const run = a.fleet.run('s1', q.body, { turnId: 't1' });
    const questionId = await q.asked;
    await waitFor(async () => (await raw.sendCommand(['EXISTS', `${scene.prefix}:{q:${questionId}}:question`])) === 1, 5000, 'the question record');
    return { a, run, questionId };
  }

  it('an answer whose publish was lost reaches the owner at its next poll: accepted', async () => {
    const { a, run, questionId } = await ownerWithoutSubscriber(300);
    const b = await scene.instance('B');
    expect(await b.fleet.answer(questionId, 'polled', { timeoutMs: 10_000 })).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
    expect(await run).toMatchObject({ status: 'completed', value: 'polled' });
    expect(await clientIdByName(raw, a.fleet.subscriberName)).toBeUndefined();
  });

  it('an answer the owner cannot take within timeoutMs is undone (relay_unavailable, nothing given) and can be given again', async () => {
    // The owner's next poll is 60 s away: only the publish could deliver, and it reaches nobody.
    const { a, run, questionId } = await ownerWithoutSubscriber(59_000);
    const b = await scene.instance('B');
    const early = await b.fleet.answer(questionId, 'early', { timeoutMs: 300 });
    expect(early).toMatchObject({ outcome: 'relay_unavailable', questionId });
    expect(early.outcome === 'relay_unavailable' && early.error.message).toMatch(/nothing was given/);
    // The subscriber back: the same question takes a new answer.
    proxy.blockName = undefined;
    await waitFor(async () => (await clientIdByName(raw, a.fleet.subscriberName)) !== undefined, 10_000, 'the subscriber to come back');
    await waitFor(async () => ((await raw.sendCommand(['PUBSUB', 'NUMSUB', `${scene.prefix}:node:${a.fleet.nodeId}`])) as [string, number])[1] === 1, 10_000, 'the resubscription');
    expect(await b.fleet.answer(questionId, 'again', { timeoutMs: 5000 })).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
    expect(await run).toMatchObject({ status: 'completed', value: 'again' });
  });

  it('a claim whose reply is lost with its connection (Redis reached again within timeoutMs) answers what became of it: accepted, as the body got it', async () => {
    // The body goes on after its answer until told: the question's record outlives the answer.
    let gotAnswer!: (value: unknown) => void;
    const got = new Promise((resolve) => { gotAnswer = resolve; });
    const h = held();
    const { a, run, questionId } = await askedOnA((ask) => async (turn) => { gotAnswer(await ask(turn)); return h.body(turn); });
    // B reaches Redis through the proxy: its claim lands, the reply is dropped, then the connection.
    const b = await scene.instance('B', { redis: viaProxy });
    proxy.onDropped = (chunk) => {
      if (!String(chunk).includes('claimed')) return;
      proxy.onDropped = undefined;
      proxy.cut();
      proxy.pass();
    };
    proxy.deaf();
    const reply = await b.fleet.answer(questionId, 'landed', { timeoutMs: 5000 });
    expect(await got).toBe('landed');
    expect(reply).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
    h.release();
    expect(await run).toMatchObject({ status: 'completed' });
  });

  it('a claim whose reply is lost with its connection, Redis not back within timeoutMs: relay_unavailable saying it may have been claimed (it was: the body got it), never that nothing was given', async () => {
    const { run, questionId } = await askedOnA();
    const b = await scene.instance('B', { redis: viaProxy });
    proxy.onDropped = (chunk) => {
      if (!String(chunk).includes('claimed')) return;
      proxy.onDropped = undefined;
      proxy.refuse();
    };
    proxy.deaf();
    const reply = await b.fleet.answer(questionId, 'landed', { timeoutMs: 500 });
    expect(reply).toMatchObject({ outcome: 'relay_unavailable', questionId });
    expect(reply.outcome === 'relay_unavailable' && reply.error.message).toMatch(/may have been claimed/);
    expect(await run).toMatchObject({ status: 'completed', value: 'landed' });
    proxy.pass();
  });

  it('fleet.close() while an answer waits for Redis to come back after a lost claim reply: the answer settles before close resolves', async () => {
    const { run, questionId } = await askedOnA();
    const b = await scene.instance('B', { redis: viaProxy, commandTimeoutMs: 500 });
    let lost!: () => void;
    const claimLost = new Promise<void>((resolve) => { lost = resolve; });
    proxy.onDropped = (chunk) => {
      if (!String(chunk).includes('claimed')) return;
      proxy.onDropped = undefined;
      proxy.refuse();
      lost();
    };
    proxy.deaf();
    let settled = false;
    const answering = b.fleet.answer(questionId, 'landed', { timeoutMs: 60_000 }).finally(() => { settled = true; });
    await claimLost;
    await b.fleet.close();
    expect(settled).toBe(true);
    const reply = await answering;
    expect(reply).toMatchObject({ outcome: 'relay_unavailable', questionId });
    expect(reply.outcome === 'relay_unavailable' && reply.error.message).toMatch(/before the fleet closed; the answer may have been claimed/);
    expect(await run).toMatchObject({ status: 'completed', value: 'landed' });
    proxy.pass();
  });

  it('a claim whose reply is lost with its connection, for a turn its answer ended meanwhile, still answers accepted (the record outlives the turn as ended, leaseMs)', async () => {
    const { a, run, questionId, key } = await askedOnA();
    const b = await scene.instance('B', { redis: viaProxy });
    proxy.onDropped = (chunk) => {
      if (!String(chunk).includes('claimed')) return;
      proxy.onDropped = undefined;
      // Back only once the turn is over: its end has dealt with the record.
      void run.then(() => { proxy.cut(); proxy.pass(); });
    };
    proxy.deaf();
    const reply = await b.fleet.answer(questionId, 'landed', { timeoutMs: 5000 });
    expect(await run).toMatchObject({ status: 'completed', value: 'landed' });
    expect(reply).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
    // The record is kept as ended, for leaseMs: a later answer is not_found.
    expect(JSON.parse((await viaRaw(key))!)).toMatchObject({ state: 'ended' });
    expect(Number(await raw.pTTL(key))).toBeLessThanOrEqual(60_000);
    expect(await b.fleet.answer(questionId, 'late', { timeoutMs: 5000 })).toEqual({ outcome: 'not_found', questionId });
  });

  it('an answer the owner took but whose reply it lost is taken again at its next poll: accepted, and the body gets it', async () => {
    const a = await scene.instance('A', { redis: viaProxy, leaseMs: 60_000, renewMs: 300 });
    const q = asking(a);
    const run = a.fleet.run('s1', q.body, { turnId: 't1' });
    const questionId = await q.asked;
    const key = `${scene.prefix}:{q:${questionId}}:question`;
    const state = async () => { const raw = await viaRaw(key); return raw === null ? null : (JSON.parse(raw) as { state: string }).state; };
    await waitFor(async () => (await state()) === 'open', 5000, 'the question record');
    // A hears nothing from Redis now: B's publish does not reach it, and its poll's take lands but its reply is lost.
    proxy.deaf();
    const b = await scene.instance('B');
    const answered = b.fleet.answer(questionId, 'kept', { timeoutMs: 10_000 });
    await waitFor(async () => (await state()) === 'delivered', 5000, 'the owner\'s take to land');
    proxy.cut();
    proxy.pass();
    expect(await answered).toEqual({ outcome: 'accepted', questionId, node: a.fleet.nodeId });
    expect(await run).toMatchObject({ status: 'completed', value: 'kept' });
  });
});
