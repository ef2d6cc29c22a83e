/**
 * What is not API is not reachable (issue 50 item 4): the objects a user holds carry no member
 * beyond their documented ones, and fullstop's own modules reach what they share through declared
 * hooks (`runnerHooks`, `ledgerHooks`, `pgLedgerHooks`, `tokenState`) that no package entry exports.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, TurnRegistry, TurnRunner, type Turn } from '../src/index.js';
import { runnerHooks } from '../src/turn/runner-hooks.js';
import { ledgerHooks } from '../src/ledger/ledger-hooks.js';

const dirs: string[] = [];
afterEach(() => { for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true }); });

/** Every property name (own and inherited below Object.prototype), symbols included. */
function members(value: object): string[] {
  const names = new Set<string>();
  for (let o: object | null = value; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const key of Reflect.ownKeys(o)) names.add(typeof key === 'symbol' ? key.toString() : key);
  }
  return [...names];
}

describe('a TurnRunner', () => {
  it('has no bodyScopes, notify, addQuestion, removeQuestion or holdShutdown; its hooks hold them', async () => {
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    const names = members(runner);
    for (const internal of ['bodyScopes', 'notify', 'addQuestion', 'removeQuestion', 'holdShutdown']) expect(names, internal).not.toContain(internal);
    const hooks = runnerHooks(runner)!;
    const seen: string[] = [];
    hooks.bodyScopes.add((turnId, run) => { seen.push(turnId); return run(); });
    await runner.run('s', async () => 1, { turnId: 't1' });
    expect(seen).toEqual(['t1']);
    await runner.shutdown();
  });

  it("gives the body a Turn with Turn's members only", async () => {
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    let turn: Turn | undefined;
    await runner.run('s', async (t) => { turn = t; });
    expect(members(turn!).filter((n) => n !== 'constructor').sort()).toEqual(['ask', 'say', 'signal', 'token', 'tool', 'turnId']);
    await runner.shutdown();
  });
});

describe('a Ledger', () => {
  it('has no appendForTurn, durableSeq, seq or syncs; its hooks hold them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-internals-'));
    dirs.push(dir);
    const ledger = await Ledger.open(join(dir, 'h.jsonl'));
    const names = members(ledger);
    for (const internal of ['appendForTurn', 'durableSeq', 'seq', 'syncs']) expect(names, internal).not.toContain(internal);
    await ledger.append({ sessionId: 's', turnId: 't', type: 'turn_started' });
    expect(ledgerHooks(ledger)!.seq).toBe(1);
    await ledger.close();
  });
});

describe('a CancelToken', () => {
  it('has no string-keyed member beyond its API, and JSON and Object.keys show no engine', () => {
    const registry = new TurnRegistry();
    const token = registry.beginTurn('s');
    expect(members(token).filter((n) => !n.startsWith('Symbol(')).sort()).toEqual([
      'cancel', 'child', 'constructor', 'handle', 'isCancelled', 'reason', 'retire', 'retired', 'sessionId', 'signal', 'throwIfCancelled',
      'toString', 'turnId',
    ]);
    expect(Object.keys(token)).toEqual([]);
    expect(JSON.stringify(token)).toBe('{}');
    registry.endTurn('s', token);
  });
});
