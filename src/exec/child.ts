/**
 * `Child`: the life of one spawned child, from spawn to result. The stop sequence of a child lives
 * here and only here (`stop` → `#sequence` → `hardStop`); each cause that can start it is one
 * file (abort.ts, timeout.ts, the token's retirement in exec.ts). Output past `maxBuffer` is not a
 * cause: it is kept as its head and tail (output.ts) while the child runs on.
 *
 * Order of a stop (docs/design.md §2, for one child), whatever the containment (tree.ts):
 * 1. SIGTERM the tree (`Tree.terminate`: synchronous and O(the tree), never a scan of the machine).
 * 2. Grace: up to `graceMs` for the tree to be empty; ends as soon as it is. A runner stop governs
 *    the grace instead (no timer here: the runner calls `hardStop()` when its own grace ends).
 * 3. Hard stop (`Tree.kill`): `cgroup.kill`, or freeze, walk and SIGKILL; wait until it is gone.
 * 4. Drain the pipes, bounded, and resolve with the output read so far.
 */

import { isStopGoverned } from '../token/owners.js';
import { onAbort } from './abort.js';
import { track } from './cleanup.js';
import { closedAfterExit, drain, DRAIN_BOUND_MS, PIPES_AFTER_EXIT_MS } from './drain.js';
import { untilEmptyOrStopped, waitForEmpty, Wake } from './grace.js';
import type { Checked } from './options.js';
import { Output } from './output.js';
import { toResult, type ExecResult, type Outcome, type StopCause } from './result.js';
import type { Registration } from './reaper.js';
import type { Subprocess } from './spawn.js';
import { onTimeout } from './timeout.js';
import type { Tree } from './tree.js';

/**
 * The reason of the hard stop's controller. Nobody reads it; given, it spares `abort()` the
 * `DOMException` it builds (stack trace included) when called with none.
 */
const HARD_STOP = 'hard stop';

/** The next turn of the event loop (after pending I/O callbacks). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** How often a tree left running after its call settled (`pipesHeldOpen`) is looked at for emptiness. */
const LEFT_RUNNING_POLL_MS = 100;

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class Child {
  readonly pid: number;
  /** The result. */
  readonly result: Promise<ExecResult>;
  /**
   * Resolves (never rejects) once the child has exited, its output is drained and its tree is gone
   * and released. Usually with `result`; later when the result said `pipesHeldOpen` (the tree runs
   * on until it ends or a stop ends it).
   */
  readonly settled: Promise<void>;

  readonly #o: Checked;
  readonly #tree: Tree;
  /** The child's place with the reaper: released once it has settled. */
  readonly #registration: Registration;
  /** Why the call fails though the child ran (the reaper did not start); `undefined`: it does not. */
  #failure: unknown;
  readonly #outcome: Outcome = { cause: undefined, forced: false, pipesHeldOpen: false };
  /** Run when the child settles: removes every timer and listener of every cause (plain calls, no event dispatch). */
  readonly #teardown: Array<() => void> = [];
  /** Aborted when the hard stop begins: ends a grace wait under way. */
  readonly #hard = new AbortController();
  /** Nudged by the leader's exit, so the grace ends without waiting for the next poll. */
  readonly #wake = new Wake();
  /** Opens when a stop begins: the output then no longer needs to close by itself. */
  readonly #stopBegan: Promise<void>;
  #openStop!: () => void;
  /** `undefined` until a stop begins; resolves when the tree is empty or hard-stopped. */
  #stopping: Promise<void> | undefined;
  /** `undefined` until the hard stop begins. */
  #hardStopping: Promise<void> | undefined;
  /** The stop under way is governed by a runner's grace. */
  #governed = false;
  /** The child is finished (its tree gone and released): nothing may be signalled any more. */
  #done = false;
  /** Run when the child settles, before `settled` (and `result`, but for `pipesHeldOpen`) resolve (owner disposers). */
  readonly #onDone: Array<() => void> = [];

  constructor(subprocess: Subprocess, tree: Tree, registration: Registration, o: Checked, startedAt: number) {
    this.pid = subprocess.pid!;
    this.#o = o;
    this.#tree = tree;
    this.#registration = registration;
    this.#stopBegan = new Promise((open) => { this.#openStop = open; });
    const untrack = track(this.#tree);
    let onExit!: (code: number | null, signal: NodeJS.Signals | null) => void;
    const exited = new Promise<Exit>((resolve) => {
      onExit = (code, signal) => {
        this.#tree.leaderReaped();
        this.#wake.nudge();
        resolve({ code, signal });
      };
    });
    let outputs: Output[];
    // All or nothing: if a step throws, what the steps before it set up is undone, and the caller
    // kills the tree (killSpawned) before the error surfaces.
    try {
      subprocess.once('exit', onExit);
      outputs = [new Output(subprocess.stdout!, 'stdout', o.maxBuffer, o.onOutput), new Output(subprocess.stderr!, 'stderr', o.maxBuffer, o.onOutput)];
      this.#teardown.push(tree.watch(() => this.#wake.nudge()));
      // The hard stop ends a grace wait under way. Listening now also makes the signal now (Node
      // makes an AbortController's signal when it is first read), not on the stop's path.
      this.#hard.signal.addEventListener('abort', () => this.#wake.nudge(), { once: true });
      const stop = (cause: StopCause, governed?: boolean) => this.stop(cause, governed);
      this.#teardown.push(onAbort(o.signal, stop), onTimeout(o.timeoutMs, stop));
    } catch (e) {
      for (const undo of this.#teardown) undo();
      subprocess.removeListener('exit', onExit);
      untrack();
      throw e;
    }
    const made = this.#run(exited, outputs, startedAt).catch((e: unknown) => this.#killThenThrow(e));
    // A tree whose pipes were held open runs on, still ours (a stop still ends it), until it is empty.
    this.settled = made.then((r) => (r.pipesHeldOpen ? this.#leftRunning() : undefined), () => undefined).then(() => this.#finish(untrack));
    this.result = made.then(
      async (r) => {
        if (!r.pipesHeldOpen) await this.settled;
        return r;
      },
      async (e: unknown) => {
        await this.settled;
        throw e;
      },
    );
  }

  /** Release everything the child holds, then run the `onDone` functions. */
  async #finish(untrack: () => void): Promise<void> {
    this.#done = true;
    for (const undo of this.#teardown) undo();
    // One step a turn: the listeners' removal, the reaper's `del` (a file write)
    // and the start of the cgroup's removal each hold the event loop (0.06–0.45 ms each on a
    // 2-core machine), and together they were a stop's longest block.
    await nextTurn();
    untrack();
    await nextTurn();
    await this.#tree.dispose();
    // Only now: the reaper removes a cgroup the host dies before removing.
    this.#registration.release();
    for (const fn of this.#onDone) fn();
  }

  /** The call has settled with its pipes held open: wait until its tree is empty, or a stop has ended it. */
  async #leftRunning(): Promise<void> {
    await untilEmptyOrStopped(this.#tree, () => this.#stopping !== undefined, LEFT_RUNNING_POLL_MS);
    await this.#stopping;
  }

  /**
   * Call `fn` once the child has settled, before anyone awaiting `result` or `settled` resumes: an
   * owner is gone from its token by the time a runner sees it settled.
   */
  onDone(fn: () => void): void {
    this.#onDone.push(fn);
  }

  /**
   * Let the command run once the reaper has confirmed that it holds the child's entry (launcher.ts,
   * invariant 1). Called last, when nothing else of the call can fail; not run if a stop began
   * first. A reaper that could not start fails the call: the launcher exits without running anything.
   */
  begin(start: (run: boolean) => void): void {
    this.#registration.ready.then(
      () => start(!this.#done && this.#stopping === undefined),
      (e: unknown) => {
        this.#failure ??= e;
        start(false);
      },
    );
  }

  /** Begin the stop sequence. Idempotent: the first cause wins; a repeat never restarts the grace. */
  stop(cause: StopCause, governed = false): void {
    if (this.#done || this.#stopping !== undefined) return;
    this.#outcome.cause ??= cause;
    this.#governed = governed;
    this.#stopping = this.#sequence();
    this.#openStop();
  }

  /** SIGKILL the whole tree; resolves once it is gone. */
  hardStop(): Promise<void> {
    if (this.#done) return Promise.resolve();
    if (this.#stopping === undefined) this.stop('cancel', true);
    this.#hardStopping ??= this.#hardSequence();
    return this.#hardStopping;
  }

  /** The token retired with the child still running: the turn is over, and so is any grace it governed. */
  retire(): void {
    if (this.#done) return;
    if (this.#stopping === undefined) this.stop('cancel');
    else if (this.#governed) void this.hardStop();
  }

  async #sequence(): Promise<void> {
    void this.#tree.terminate();
    const graceMs = this.#governed ? Infinity : this.#o.graceMs;
    if (await waitForEmpty(this.#tree, graceMs, this.#hard.signal, this.#wake, true)) return;
    // A runner stop that began during this child's own grace governs from then on (docs/design.md §2).
    if (!this.#hard.signal.aborted && this.#o.token !== undefined && isStopGoverned(this.#o.token)) {
      this.#governed = true;
      if (await waitForEmpty(this.#tree, Infinity, this.#hard.signal, this.#wake)) return;
    }
    await this.hardStop();
  }

  /**
   * Something failed while the child ran (anything but an output overflow, whose stop has already
   * emptied the tree): nothing it started may outlive the error.
   */
  async #killThenThrow(e: unknown): Promise<never> {
    try {
      if (!this.#tree.isEmpty()) await this.hardStop();
    } catch {
      this.#tree.killNow(); // the hard stop itself failed: SIGKILL what can be reached now
    }
    throw e;
  }

  async #hardSequence(): Promise<void> {
    this.#hard.abort(HARD_STOP);
    if (await this.#tree.kill()) this.#outcome.forced = true;
  }

  async #run(exited: Promise<Exit>, outputs: Output[], startedAt: number): Promise<ExecResult> {
    const exit = await exited;
    // With no stop, the output is what the caller waits for, as with execa, as long as the pipes
    // close; held open past PIPES_AFTER_EXIT_MS (a background process of the command holds them),
    // the call settles with what arrived and leaves that process running (docs/exec.md, "Faults").
    if (!(await closedAfterExit(outputs, PIPES_AFTER_EXIT_MS, this.#stopBegan)) && this.#stopping === undefined) {
      this.#outcome.pipesHeldOpen = true;
      for (const output of outputs) output.destroy();
      await drain(outputs, 0);
    }
    await this.#tree.ready();
    if (this.#stopping === undefined && !this.#outcome.pipesHeldOpen && !this.#tree.isEmpty()) this.stop('leftover');
    if (this.#stopping !== undefined) {
      await this.#stopping;
      await drain(outputs, DRAIN_BOUND_MS);
    }
    if (this.#failure !== undefined) throw this.#failure;
    // Both streams have closed (allClosed, or drain's destroy): onOutput has nothing more to tell
    // once the result is made (output.ts, invariant 4).
    const [stdout, stderr] = outputs.map((output) => output.kept()) as [{ text: string; omittedBytes: number }, { text: string; omittedBytes: number }];
    return toResult(this.#outcome, {
      exitCode: exit.code, signal: exit.signal, stdout: stdout.text, stderr: stderr.text, pid: this.pid, wallMs: performance.now() - startedAt,
      containment: this.#tree.mode, omittedBytes: { stdout: stdout.omittedBytes, stderr: stderr.omittedBytes },
    });
  }
}
