/**
 * What fullstop's own modules reach of a `TurnRunner` beyond its API: the wrappers of every turn's
 * body (fullstop/otel) and the work `shutdown()` awaits (a fleet). Declared here, held in a
 * WeakMap the runner fills when it is made; no package entry exports this module, so a caller of
 * the runner sees none of it (issue 50: what is not API is not reachable).
 */

import type { StopReport } from './report.js';

/** A wrapper of a turn's body: calls `run` once and returns what it returns. */
export type BodyScope = (turnId: string, run: () => Promise<unknown>) => Promise<unknown>;

export interface RunnerHooks {
  /** Wrappers of every turn's body, the first added outermost (fullstop/otel runs the body in its span's context). */
  readonly bodyScopes: Set<BodyScope>;
  /**
   * Have `shutdown()` await `hold(reports)` after its stops, within its deadline (a fleet makes
   * its stopped turns' records final there). Returns the function that removes it.
   */
  holdShutdown(hold: (reports: readonly StopReport[]) => Promise<unknown>): () => void;
}

const hooks = new WeakMap<object, RunnerHooks>();

/** Called once by the runner's constructor. */
export function setRunnerHooks(runner: object, runnerHooks: RunnerHooks): void {
  hooks.set(runner, runnerHooks);
}

/** The hooks of `runner`; `undefined` for anything not a `TurnRunner` of this copy of the library. */
export function runnerHooks(runner: object): RunnerHooks | undefined {
  return hooks.get(runner);
}
