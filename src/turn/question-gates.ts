/**
 * Work a runner waits for before it tells anyone of a question (its `question` event): a fleet's
 * record of the question in Redis, so that an answer sent through any instance the moment a client
 * sees the question finds it (with the event first, a fast answer through another instance was
 * `not_found`).
 *
 * Invariants:
 * 1. The event waits for every gate's promise to settle (fulfilled or not: a gate that fails, Redis
 *    away, only leaves the question answerable where it was asked), and no longer: a gate bounds
 *    its own work (the fleet's command timeout).
 * 2. A question withdrawn meanwhile (its turn stopped or ended) is not announced.
 * 3. With no gate, the event goes at once, as before.
 */

import type { TurnRunnerEvents } from './runner-events.js';

/** A `question` event's payload. */
export type QuestionEvent = TurnRunnerEvents['question'][0];
/** Work to finish before a question is announced; `undefined`: none for this question. */
export type QuestionGate = (question: QuestionEvent) => Promise<unknown> | undefined;

/** Each runner's gates (a runner is any object: the registry holds it weakly). */
const gates = new WeakMap<object, Set<QuestionGate>>();

/** Run `gate` for every question `runner` asks from now on, before its event; returns the function that removes it. */
export function gateQuestions(runner: object, gate: QuestionGate): () => void {
  const set = gates.get(runner) ?? new Set<QuestionGate>();
  gates.set(runner, set);
  set.add(gate);
  return () => {
    set.delete(gate);
    if (set.size === 0 && gates.get(runner) === set) gates.delete(runner);
  };
}

/** Calls `announce` once `runner`'s gates are done with `question`, if `open()` still says it is open. */
export function afterGates(runner: object, question: QuestionEvent, open: () => boolean, announce: () => void): void {
  const waits: Promise<unknown>[] = [];
  for (const gate of gates.get(runner) ?? []) {
    try {
      const wait = gate(question);
      if (wait !== undefined) waits.push(wait);
    } catch {
      // A gate that throws holds nothing back (invariant 1).
    }
  }
  if (waits.length === 0) return announce(); // invariant 3
  void Promise.allSettled(waits).then(() => { if (open()) announce(); });
}
