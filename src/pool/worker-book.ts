/**
 * What the pool knows about each of its worker threads, by thread id: which slabs it has been
 * sent (protocol.ts), and whether it is condemned (task-run.ts: a stopped task that ignored its
 * grace while sharing the worker). Thread ids are never reused within a process, so an entry of a
 * gone worker is only stale, never wrong; stale slab entries are dropped now and then.
 */

import { slabById } from '../token/slab.js';
import type { Condemned } from './options.js';
import { attachBuffers, rootSlabOf, slabOf } from './protocol.js';
import type { TaskRun } from './task-run.js';

export interface WorkerControl {
  /** Terminate thread `threadId` (piscina respawns one and rejects what ran on it). */
  terminate(threadId: number): void;
  /** Thread ids of the pool's workers now. */
  liveThreadIds(): number[];
  readonly maxThreads: number;
}

export class WorkerBook {
  /** Slab ids sent to each worker thread. */
  readonly #sent = new Map<number, Set<number>>();
  /** Shared with the load balancer wrapper, which keeps tasks off these workers (dispatch.ts). */
  readonly #condemned: Map<number, Condemned>;
  readonly #control: WorkerControl;
  readonly #concurrent: boolean;

  constructor(condemned: Map<number, Condemned>, control: WorkerControl, concurrent: boolean) {
    this.#condemned = condemned;
    this.#control = control;
    this.#concurrent = concurrent;
  }

  /** The run's worker was just chosen: attach the buffers of the slabs it has not been sent yet. */
  sendSlabs(run: TaskRun): void {
    const threadId = run.worker!.id;
    let sent = this.#sent.get(threadId);
    if (sent === undefined) {
      if (this.#sent.size >= 2 * this.#control.maxThreads) this.#forgetGoneWorkers();
      this.#sent.set(threadId, (sent = new Set()));
    }
    const payload = run.payload;
    const slab = slabOf(payload);
    const root = rootSlabOf(payload);
    if (sent.has(slab) && (root === undefined || sent.has(root))) return;
    const ids = [slab, root].filter((id, i, all): id is number => id !== undefined && !sent.has(id) && all.indexOf(id) === i);
    attachBuffers(payload, ids.map((id) => [id, slabById(id)!.buffer]));
    for (const id of ids) sent.add(id);
    run.sentSlabs = ids;
  }

  /** A payload that never reached its worker (it could not be cloned): neither did its buffers. */
  unsend(run: TaskRun): void {
    if (run.sentSlabs !== undefined) for (const id of run.sentSlabs) this.#sent.get(run.worker!.id)?.delete(id);
  }

  #forgetGoneWorkers(): void {
    const live = new Set(this.#control.liveThreadIds());
    for (const id of this.#sent.keys()) if (!live.has(id)) this.#sent.delete(id);
  }

  /**
   * The hard stop of a started task that piscina does not abort itself (task-run.ts): terminate
   * its worker (piscina respawns one and rejects the task), unless other tasks share it — then the
   * worker is condemned, the task abandoned (true: reject it now), and the worker ends when they
   * have settled (`reap`), or after one more grace window if they have not (then they reject with
   * piscina's "worker exited" error).
   */
  hardStop(run: TaskRun): boolean {
    const worker = run.worker!;
    const condemned = this.#condemned.get(worker.id);
    const abandoned = (condemned?.abandoned ?? 0) + 1;
    if (!this.#concurrent || worker.currentUsage <= abandoned) {
      this.#end(worker.id);
      return false;
    }
    if (condemned !== undefined) condemned.abandoned = abandoned;
    else this.#condemned.set(worker.id, { worker, abandoned, deadline: setTimeout(() => this.#end(worker.id), run.graceMs) });
    return true;
  }

  /**
   * The code of an abandoned task ended on its worker by itself: one fewer there. With none left,
   * the worker is no longer condemned (it runs nothing of a stopped task) and takes tasks again.
   */
  abandonedLeft(run: TaskRun): void {
    const id = run.worker!.id;
    const condemned = this.#condemned.get(id);
    if (condemned === undefined || --condemned.abandoned > 0) return; // already ended, or still one there
    clearTimeout(condemned.deadline);
    this.#condemned.delete(id);
  }

  /** A task settled: end each condemned worker that now runs nothing but its abandoned tasks. */
  reap(): void {
    if (this.#condemned.size === 0) return;
    for (const [id, { worker, abandoned }] of this.#condemned) if (worker.currentUsage <= abandoned) this.#end(id);
  }

  #end(threadId: number): void {
    const condemned = this.#condemned.get(threadId);
    if (condemned !== undefined) clearTimeout(condemned.deadline);
    this.#condemned.delete(threadId);
    this.#control.terminate(threadId);
  }
}

