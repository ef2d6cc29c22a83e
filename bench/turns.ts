// What the runner benches' turns do while they wait for their stop, and a counter to wait for N of them.
import { CancelledError, type Turn } from '../src/index.js';

/** A model stream: rejects with an error of its own once `signal` aborts (the turn's tool, and the floor's peer of it). */
export const untilStopped = (signal: AbortSignal): Promise<never> => new Promise((_, reject) => {
  const onAbort = () => reject(new CancelledError('stream aborted', { reason: signal.reason }));
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
});

/** A turn waiting in its tool `name` for its stop; `running()` once the tool's fn runs (its `tool_call` is written by then). */
export const waitingTurn = (name: string, running: () => void) => (turn: Turn) => turn.tool(name, { model: 'bench' }, () => {
  running();
  return untilStopped(turn.signal);
});

/** `done` resolves once `tick` was called `n` times. */
export function countdown(n: number): { tick: () => void; done: Promise<void> } {
  let left = n;
  let resolve!: () => void;
  const done = new Promise<void>((r) => { resolve = r; });
  return { tick: () => { if (--left === 0) resolve(); }, done };
}
