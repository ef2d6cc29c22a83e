/**
 * How the pool learns that a task has left the queue for a worker: piscina asks its load
 * balancer for a worker right before posting a task, so a wrapped balancer sees the moment a
 * task starts, and which worker it goes to. The task's run is found through its queue options
 * (`queueOptionsSymbol`), which piscina reads from the payload and which never cross to the worker
 * (symbol keys are not cloned). Tasks without a run (no token) pass straight through.
 *
 * The same wrapper keeps tasks off a worker that is condemned: one whose stopped task ignored its
 * grace while other tasks shared the worker, so it ends once those have settled (task-run.ts).
 */

import { queueOptionsSymbol } from 'piscina';

/** What piscina shows a balancer of each worker (`PiscinaWorker`). */
export interface WorkerView { readonly id: number; readonly currentUsage: number; readonly isRunningAbortableTask: boolean }
type Balancer = (task: { isAbortable: boolean; [key: symbol]: unknown }, workers: WorkerView[]) => WorkerView | null;

/** The symbol under which a payload's queue options hold the task's run. */
export const RUN = Symbol('fullstop.run');

export interface Startable { markStarted(worker: WorkerView): void }

/**
 * The policy of a pool given no `loadBalancer`. The balancer is piscina's one public moment of "this
 * task goes to that worker", which the pool needs (buffers ride along, a hard stop knows its
 * worker), so a pool always has one; piscina exports no default to wrap, so this is the
 * least-busy balancer its API reference gives for `PiscinaLoadBalancer`, which piscina 5.3.2 also
 * uses as its default: an idle worker first; an abortable task (one run with a plain `signal`)
 * only ever gets an idle worker, and no task joins a worker that runs an abortable one.
 */
export function leastBusy(maximumUsage: number): Balancer {
  return (task, workers) => {
    let candidate: WorkerView | null = null;
    let checkpoint = maximumUsage;
    // The same decisions as piscina's, each getter read at most once (they are not free).
    for (const worker of workers) {
      const usage = worker.currentUsage;
      if (usage === 0) return worker;
      if (task.isAbortable || usage >= checkpoint || worker.isRunningAbortableTask) continue;
      candidate = worker;
      checkpoint = usage;
    }
    return candidate;
  };
}

/** Closes the queue: while `held`, no queued task starts (a forced close rejects them, pool.ts). */
export interface QueueGate { held: boolean }

/**
 * `inner`, minus the `condemned` workers (by thread id), telling each task's run where it went;
 * nothing starts while the `gate` is held.
 */
export function observeStarts(inner: Balancer, condemned: ReadonlyMap<number, unknown>, gate: QueueGate): Balancer {
  return (task, workers) => {
    if (gate.held) return null;
    const chosen = inner(task, condemned.size === 0 ? workers : workers.filter((w) => !condemned.has(w.id)));
    if (chosen !== null) (task[queueOptionsSymbol] as { [RUN]?: Startable } | null)?.[RUN]?.markStarted(chosen);
    return chosen;
  };
}

/**
 * Queue options for a payload: the user's own (inherited, so a custom task queue still reads them)
 * plus the run. With none of the user's, the run is its own queue options (it answers `[RUN]`
 * with itself): one object less on every task.
 */
export function queueOptionsFor(own: unknown, run: Startable & { readonly [RUN]: Startable }): object {
  if (own === null || typeof own !== 'object') return run;
  const options = Object.create(own) as Record<symbol, unknown>;
  options[RUN] = run;
  return options;
}
