/**
 * How the pool learns that a task has left the queue for a worker: piscina asks its load
 * balancer for a worker right before posting a task, so a wrapped balancer sees the moment a
 * task starts, and which thread it goes to. The task's run is found through its queue options
 * (`queueOptionsSymbol`), which piscina reads from the payload and which never cross to the worker
 * (symbol keys are not cloned). Tasks without a run (no token) pass straight through.
 *
 * The rule this serves (issue #3): a queued task is dropped at once on cancel; a started one gets
 * the cooperative stop and, after the grace window, the hard stop.
 */

import { queueOptionsSymbol } from 'piscina';

type Balancer = (task: { isAbortable: boolean; [key: symbol]: unknown }, workers: Candidate[]) => Candidate | null;
interface Candidate { readonly id: number; readonly currentUsage: number; readonly isRunningAbortableTask: boolean }

/** The symbol under which a payload's queue options hold the task's run. */
export const RUN = Symbol('fullstop.run');

export interface Startable { markStarted(threadId: number): void }

/**
 * Piscina's default policy, restated because piscina does not export it: an idle worker first;
 * an abortable task (ours with a token when workers run several tasks at once) only ever gets an
 * idle worker, and no task joins a worker that runs an abortable one.
 */
export function leastBusy(maximumUsage: number): Balancer {
  return (task, workers) => {
    let candidate: Candidate | null = null;
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

export function observeStarts(inner: Balancer): Balancer {
  return (task, workers) => {
    const chosen = inner(task, workers);
    if (chosen !== null) (task[queueOptionsSymbol] as { [RUN]?: Startable } | null)?.[RUN]?.markStarted(chosen.id);
    return chosen;
  };
}

/** Queue options for a payload: the user's own (inherited, so a custom task queue still reads them) plus the run. */
export function queueOptionsFor(userTask: unknown, run: Startable): object {
  const own = userTask !== null && typeof userTask === 'object' ? (userTask as Record<symbol, unknown>)[queueOptionsSymbol] : undefined;
  const options = Object.create((own as object | undefined) ?? null) as Record<symbol, unknown>;
  options[RUN] = run;
  return options;
}
