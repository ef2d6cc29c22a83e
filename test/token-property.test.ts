/**
 * Model-based property test of the token core: random sequences of begin / end / endTurn with a
 * possibly stale token / cancel / markCancelled / child / retire / cancels from "another thread"
 * (a WorkerToken over a handle, possibly of a reused cell) / registerCancelEvent + abort, over
 * several sessions, against a small model. After every step, docs/design.md invariants 1–4 and the
 * registry's resource counts are checked against the model.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  activeToken, CancelledError, CancelToken, runInSession, TurnRegistry, type TokenHandle,
} from '../dist/src/index.js';
import { tokenFromHandle } from '../dist/workers/runtime.js';
import { addOwner } from '../dist/src/token/owners.js';

const SESSIONS = ['a', 'b', 'c'] as const;
type Session = (typeof SESSIONS)[number];

/** The model of one token. */
interface ModelToken {
  readonly id: number;
  readonly session: Session;
  readonly turnId: string | undefined;
  readonly parent: number | undefined;
  /** Live children (a retired child leaves its parent's tree). */
  readonly children: Set<number>;
  readonly adopted: boolean;
  cancelled: boolean;
  retired: boolean;
  reason: unknown;
  exported: boolean;
  controllerAborted: boolean;
  /** A child of a cancelled token: its signal is aborted before anyone can listen. */
  startedCancelled: boolean;
}

class Model {
  readonly tokens: ModelToken[] = [];
  readonly current = new Map<Session, number>();

  add(session: Session, turnId: string | undefined, parent: number | undefined, adopted: boolean): ModelToken {
    const t: ModelToken = {
      id: this.tokens.length, session, turnId, parent, children: new Set(), adopted,
      cancelled: false, retired: false, reason: undefined, exported: false, controllerAborted: false,
      startedCancelled: false,
    };
    this.tokens.push(t);
    if (parent !== undefined) {
      const p = this.tokens[parent];
      p.children.add(t.id);
      if (p.cancelled) { t.cancelled = true; t.reason = 'cancel.parent'; t.startedCancelled = true; }
    }
    return t;
  }

  /** Cancel flows down only; the first reason wins; a retired token refuses (false). */
  cancel(id: number, reason: unknown): boolean {
    const t = this.tokens[id];
    if (t.retired) return false;
    if (t.cancelled) return true;
    const visit = (n: ModelToken, r: unknown) => {
      if (n.cancelled) return;
      n.cancelled = true;
      n.reason = r;
      if (n.adopted) n.controllerAborted = true;
      for (const c of n.children) visit(this.tokens[c], 'cancel.parent');
    };
    visit(t, reason);
    return true;
  }

  retire(id: number): void {
    const t = this.tokens[id];
    if (t.retired) return;
    for (const c of [...t.children]) this.retire(c);
    t.retired = true;
    if (t.parent !== undefined) this.tokens[t.parent].children.delete(id);
    if (this.current.get(t.session) === id) this.current.delete(t.session);
  }

  begin(session: Session, turnId: string | undefined, adopted: boolean): ModelToken {
    const leftover = this.current.get(session);
    if (leftover !== undefined) this.retire(leftover);
    const t = this.add(session, turnId, undefined, adopted);
    this.current.set(session, t.id);
    return t;
  }
}

class Real {
  readonly registry = new TurnRegistry({ slots: 4 }); // small slabs: growth and cell reuse all the time
  readonly tokens: CancelToken[] = [];
  readonly handles: Array<TokenHandle | undefined> = [];
  readonly controllers: Array<AbortController | undefined> = [];
  readonly aborts: number[] = [];
  readonly retireCalls: number[] = [];
  steps = 0;

  track(token: CancelToken, exportHandle: boolean, controller?: AbortController): number {
    const id = this.tokens.length;
    this.tokens.push(token);
    this.controllers.push(controller);
    this.aborts.push(0);
    this.retireCalls.push(0);
    token.signal.addEventListener('abort', () => this.aborts[id]++);
    this.handles.push(exportHandle ? token.handle : undefined);
    // One owner per token that disposes itself when told of the retire: counts retires per token.
    const dispose = addOwner(token, {
      kind: 'probe', settled: Promise.resolve(), hardStop() {},
      onRetire: () => { this.retireCalls[id]++; dispose(); },
    });
    return id;
  }
}

type Cmd = fc.Command<Model, Real>;

/**
 * `Object.is` check that only builds an assertion when it fails: checkAll runs over every token
 * after every step, and vitest's `expect` would dominate the run time.
 */
function same(actual: unknown, expected: unknown, what: string): void {
  if (!Object.is(actual, expected)) expect(actual, what).toBe(expected);
}

/** Invariants 1–4 and the counts, after every step. */
function checkAll(m: Model, r: Real): void {
  r.steps++;
  // Main-thread view of every token, newest first (a child read before its parent must already
  // see a cancel another thread wrote into the parent's slot).
  for (let id = m.tokens.length - 1; id >= 0; id--) {
    const t = m.tokens[id];
    const real = r.tokens[id];
    same(real.isCancelled(), t.cancelled, `token ${id} cancelled`);
    same(real.retired, t.retired, `token ${id} retired`);
    same(real.reason, t.cancelled ? t.reason : undefined, `token ${id} reason`);
    // Invariant 3: retired exactly once (the owner probe counts the retire callbacks).
    same(r.retireCalls[id], t.retired ? 1 : 0, `token ${id} retire count`);
    const aborted = t.adopted ? t.controllerAborted : t.cancelled;
    same(real.signal.aborted, aborted, `token ${id} signal`);
    same(r.aborts[id], aborted && !t.startedCancelled ? 1 : 0, `token ${id} abort events`);
    same(real.sessionId, t.session, `token ${id} session`);
  }
  // The other threads' view: "cancelled" there means cancelled or over.
  for (let id = 0; id < m.tokens.length; id++) {
    const handle = r.handles[id];
    if (handle === undefined) continue;
    const t = m.tokens[id];
    same(tokenFromHandle(handle).isCancelled(), t.cancelled || t.retired, `token ${id} seen from a worker`);
  }
  let live = 0;
  // One bridge per slab that holds a live token whose handle was taken while it still ran: a
  // cancelled token stays watched until it retires (bridge.ts).
  const bridged = new Set<SharedArrayBuffer>();
  m.tokens.forEach((t, id) => {
    if (t.retired) return;
    live++;
    if (t.exported && !t.startedCancelled) bridged.add(r.handles[id]!.buffer);
  });
  const bridges = bridged.size;
  for (const s of SESSIONS) {
    const id = m.current.get(s);
    const current = r.registry.currentToken(s);
    // Invariant 1: one token per turn, and the ambient check resolves to that same one.
    same(current, id === undefined ? undefined : r.tokens[id], `current token of ${s}`);
    same(runInSession(s, () => activeToken(), r.registry), current, `activeToken() bound to ${s}`);
    // Invariant 4: no cancel state outlives a turn.
    same(r.registry.isCancelled(s), id === undefined ? false : m.tokens[id].cancelled, `isCancelled(${s})`);
  }
  const stats = r.registry.stats();
  same(stats.liveTokens, live, 'liveTokens');
  same(stats.liveSlots, live, 'liveSlots');
  same(stats.liveBridges, bridges, 'liveBridges');
  same(stats.liveOwners, live, 'liveOwners');
}

const session = fc.constantFrom(...SESSIONS);
const reason = fc.constantFrom<unknown>(undefined, 'timeout', 'cancel.user', 'tool-timeout');
const pick = fc.nat();

function tokensOf(m: Model, filter: (t: ModelToken) => boolean = () => true): ModelToken[] {
  return m.tokens.filter(filter);
}

const commands: Array<fc.Arbitrary<Cmd>> = [
  fc.tuple(session, fc.boolean()).map(([s, exportHandle]): Cmd => ({
    check: () => true,
    run(m, r) {
      const t = m.begin(s, `turn-${m.tokens.length}`, false);
      t.exported = exportHandle;
      const token = r.registry.beginTurn(s, t.turnId);
      r.track(token, exportHandle);
      // Invariant 4: a new turn never starts cancelled.
      expect(token.isCancelled()).toBe(false);
      expect(r.registry.isCancelled(s)).toBe(false);
      checkAll(m, r);
    },
    toString: () => `begin(${s}${exportHandle ? ', export' : ''})`,
  })),
  session.map((s): Cmd => ({
    check: () => true,
    run(m, r) {
      const id = m.current.get(s);
      if (id !== undefined) m.retire(id);
      r.registry.endTurn(s);
      checkAll(m, r);
    },
    toString: () => `endTurn(${s})`,
  })),
  session.map((s): Cmd => ({
    check: () => true,
    run(m, r) {
      const id = m.current.get(s);
      if (id !== undefined) m.retire(id);
      r.registry.clearCancel(s);
      checkAll(m, r);
    },
    toString: () => `clearCancel(${s})`,
  })),
  // endTurn(s, token) with any token of the session, most often a stale one.
  fc.tuple(session, pick).map(([s, n]): Cmd => ({
    check: (m) => tokensOf(m, (t) => t.session === s).length > 0,
    run(m, r) {
      const candidates = tokensOf(m, (t) => t.session === s);
      const t = candidates[n % candidates.length];
      m.retire(t.id);
      r.registry.endTurn(s, r.tokens[t.id]);
      checkAll(m, r);
    },
    toString: () => `endTurn(${s}, #${n})`,
  })),
  fc.tuple(session, reason).map(([s, why]): Cmd => ({
    check: () => true,
    run(m, r) {
      const id = m.current.get(s);
      const expected = id === undefined ? false : m.cancel(id, why ?? 'cancel.session');
      expect(r.registry.markCancelled(s, why)).toBe(expected);
      checkAll(m, r);
    },
    toString: () => `markCancelled(${s}, ${String(why)})`,
  })),
  fc.tuple(pick, reason).map(([n, why]): Cmd => ({
    check: (m) => m.tokens.length > 0,
    run(m, r) {
      const id = n % m.tokens.length;
      const expected = m.cancel(id, why ?? 'cancel.user');
      expect(r.tokens[id].cancel(why)).toBe(expected);
      checkAll(m, r);
    },
    toString: () => `cancel(#${n}, ${String(why)})`,
  })),
  fc.tuple(pick, fc.boolean()).map(([n, exportHandle]): Cmd => ({
    check: (m) => m.tokens.length > 0,
    run(m, r) {
      const id = n % m.tokens.length;
      const parent = m.tokens[id];
      if (parent.retired) {
        expect(() => r.tokens[id].child()).toThrow(CancelledError);
      } else {
        const t = m.add(parent.session, parent.turnId, id, false);
        t.exported = exportHandle;
        const child = r.tokens[id].child();
        expect(child.turnId).toBe(parent.turnId);
        r.track(child, exportHandle);
      }
      checkAll(m, r);
    },
    toString: () => `child(#${n}${exportHandle ? ', export' : ''})`,
  })),
  pick.map((n): Cmd => ({
    check: (m) => m.tokens.length > 0,
    run(m, r) {
      const id = n % m.tokens.length;
      m.retire(id);
      r.tokens[id].retire();
      checkAll(m, r);
    },
    toString: () => `retire(#${n})`,
  })),
  // A cancel from another thread through a handle taken when the token was made: once the token
  // has retired, its cell may belong to a later token, which this cancel must never reach.
  pick.map((n): Cmd => ({
    check: (m) => m.tokens.some((t) => t.exported),
    run(m, r) {
      const exported = tokensOf(m, (t) => t.exported);
      const t = exported[n % exported.length];
      const expected = m.cancel(t.id, 'cancel.user');
      expect(tokenFromHandle(r.handles[t.id]!).cancel('ignored')).toBe(expected);
      checkAll(m, r);
    },
    toString: () => `workerCancel(#${n})`,
  })),
  fc.tuple(session, fc.boolean()).map(([s, exportHandle]): Cmd => ({
    check: () => true,
    run(m, r) {
      const t = m.begin(s, undefined, true);
      t.exported = exportHandle;
      const controller = new AbortController();
      const token = r.registry.registerCancelEvent(s, controller);
      r.track(token, exportHandle, controller);
      expect(token.isCancelled()).toBe(false);
      checkAll(m, r);
    },
    toString: () => `registerCancelEvent(${s}${exportHandle ? ', export' : ''})`,
  })),
  // The caller aborts an adopted controller, maybe long after its token retired.
  fc.tuple(pick, fc.constantFrom('abort.a', 'abort.b')).map(([n, why]): Cmd => ({
    check: (m) => m.tokens.some((t) => t.adopted),
    run(m, r) {
      const adopted = tokensOf(m, (t) => t.adopted);
      const t = adopted[n % adopted.length];
      if (!t.controllerAborted) {
        t.controllerAborted = true;
        m.cancel(t.id, why);
      }
      r.controllers[t.id]!.abort(why);
      checkAll(m, r);
    },
    toString: () => `abortController(#${n}, ${why})`,
  })),
];

describe('the token core against a model', () => {
  it('keeps invariants 1–4 and exact resource counts after every step of random turn sequences', () => {
    let steps = 0;
    let runs = 0;
    fc.assert(
      fc.property(fc.commands(commands, { maxCommands: 150, size: 'max' }), (cmds) => {
        const model = new Model();
        const real = new Real();
        fc.modelRun(() => ({ model, real }), cmds);
        // End every session: nothing may be left behind (invariant 4, and 5 for slots/bridges).
        for (const s of SESSIONS) real.registry.endTurn(s);
        expect(real.registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
        for (let id = 0; id < real.tokens.length; id++) {
          expect(real.tokens[id].retired).toBe(true);
          expect(real.retireCalls[id]).toBe(1);
        }
        steps += real.steps;
        runs++;
      }),
      { numRuns: 800 },
    );
    expect(runs).toBe(800);
    // The issue asks for at least 10k checked steps in CI.
    expect(steps).toBeGreaterThanOrEqual(10_000);
  });
});
