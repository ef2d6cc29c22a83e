/**
 * The checks of `TurnRunner`'s options (constructor, `run`, `stop`), once at the boundary. Each
 * option is read exactly once (a getter cannot answer one value to the check and another to the
 * runner), and a bad one is a TypeError or RangeError naming it, thrown before anything changes.
 */

import { checkId, checkMs, describe } from '../errors.js';
import { TurnPool } from '../pool/pool.js';
import { TurnRegistry, turns } from '../token/registry.js';
import { Ledger } from './ledger.js';

export interface TurnRunnerOptions {
  /** @default turns (the default registry) */
  registry?: TurnRegistry;
  /** The pool the turn's tools run on; kept as `runner.pool` for them. */
  pool?: TurnPool;
  /** Where history goes; without one, nothing is written (events still are). */
  ledger?: Ledger;
  /** Default grace of `stop()`, 0 to 2^31−1 ms. @default 100 */
  graceMs?: number;
}

const DEFAULT_GRACE_MS = 100;

/** `options` as an object with each named field read once; TypeError when it is not an object. */
function fields(where: string, options: unknown, names: readonly string[]): Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${where}: expected an object, got ${describe(options)}`);
  }
  const out: Record<string, unknown> = {};
  for (const name of names) out[name] = (options as Record<string, unknown>)[name];
  return out;
}

export function checkRunnerOptions(options: unknown): Required<Omit<TurnRunnerOptions, 'pool' | 'ledger'>> & Pick<TurnRunnerOptions, 'pool' | 'ledger'> {
  const { registry = turns, pool, ledger, graceMs = DEFAULT_GRACE_MS } = fields('options', options, ['registry', 'pool', 'ledger', 'graceMs']);
  if (!(registry instanceof TurnRegistry)) throw new TypeError(`options.registry: expected a TurnRegistry, got ${describe(registry)}`);
  if (pool !== undefined && !(pool instanceof TurnPool)) throw new TypeError(`options.pool: expected a TurnPool, got ${describe(pool)}`);
  if (ledger !== undefined && !(ledger instanceof Ledger)) throw new TypeError(`options.ledger: expected a Ledger, got ${describe(ledger)}`);
  checkMs('options.graceMs', graceMs);
  return { registry, pool, ledger, graceMs: graceMs as number };
}

/** What `TurnRunner.run` takes besides the session and the body. */
export interface RunOptions {
  /** The turn's id; must not be in the ledger yet. @default `turn-${randomUUID()}` */
  turnId?: string;
  /**
   * A caller's AbortSignal (an HTTP request's, a parent task's): its abort is a stop of this turn
   * under the runner's grace, with the signal's reason, exactly as `runner.stop` would be. An
   * already aborted signal stops the turn before its body starts.
   */
  signal?: AbortSignal;
}

export function checkRunOptions(options: unknown): RunOptions {
  const { turnId, signal } = fields('options', options, ['turnId', 'signal']);
  if (turnId !== undefined) checkId('options.turnId', turnId);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`options.signal: expected an AbortSignal, got ${describe(signal)}`);
  return { turnId, signal };
}

export function checkStopOptions(options: unknown): { graceMs?: number; reason?: string } {
  const { graceMs, reason } = fields('options', options, ['graceMs', 'reason']);
  checkMs('options.graceMs', graceMs);
  if (reason !== undefined) checkId('options.reason', reason);
  return { graceMs, reason };
}
