/**
 * `Tree`: what a stop needs from the containment of one child, whichever it is (containment.ts
 * decides): a cgroup of its own (cgroup.ts), its process group plus the identity rule (group.ts),
 * or, with no /proc, its group and the tree tree-kill finds (tree-kill.ts).
 * The stop sequence (child.ts) speaks only this interface.
 */

/** How the children of `exec` are contained: see docs/exec.md, "Containment". */
export type Containment = 'cgroup' | 'process-group' | 'tree-kill';

export interface Tree {
  readonly mode: Containment;
  /** The child's pid, which is also its process group and session id. */
  readonly pid: number;
  /** One line for the reaper: what to kill if the host dies (reaper.ts). */
  readonly reaperEntry: string;
  /** Node has reaped the leader (its 'exit' event, emitted in the same callback as the reap). */
  leaderReaped(): void;
  /** Resolves once whatever the leader's exit made the tree look for has been looked at. */
  ready(): Promise<void>;
  /**
   * The SIGTERM step. Its synchronous part costs O(the tree), never a scan of the machine; the
   * promise resolves when any further search (run in slices, the event loop free) is done.
   */
  terminate(): Promise<void>;
  /** Nothing of the tree is alive. Cheap, O(the tree) at most: the grace window polls it. */
  isEmpty(): boolean;
  /**
   * Call `nudge` when the tree may have become empty, so the grace window ends without waiting for
   * its next poll; returns the unsubscribe. A tree with no such event returns a no-op.
   */
  watch(nudge: () => void): () => void;
  /** The hard stop: SIGKILL all of it; resolves whether anything was alive (`forced`) once it is gone. */
  kill(): Promise<boolean>;
  /** Synchronous last resort at process exit: SIGKILL what can be reached now. */
  killNow(): void;
  /**
   * Release what the tree holds (a cgroup directory), once the child has settled; off the main
   * thread where it can be. Resolves once it is released (or found busy: then retried later).
   */
  dispose(): Promise<void>;
}
