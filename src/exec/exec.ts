/** `exec`: run one command as a child of the turn, and stop its whole tree with the turn. */

import { CancelledError } from '../errors.js';
import { activeToken } from '../token/context.js';
import { addOwner, isStopGoverned } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import { Child } from './child.js';
import { check, type Checked, type ExecOptions } from './options.js';
import type { ExecResult } from './result.js';
import { killSpawned } from './rollback.js';
import { spawn } from './spawn.js';

/**
 * Run `file` with `args` (no shell: each argument reaches the child verbatim) as the leader of a
 * new process group, and resolve with what it did.
 *
 * - A non-zero exit resolves (`exitCode`); only a spawn failure rejects, with a `ToolError` naming
 *   the command (ENOENT, EACCES). Output past `maxBuffer` is kept as its head and its tail with a
 *   `… N bytes omitted …` line between; `onOutput` sees all of it as it arrives.
 * - A cancel (`token`, `signal`) or `timeoutMs` stops the tree: SIGTERM to all of it; up to
 *   `graceMs` for it to end; then SIGKILL of all of it (`cgroup.kill`; or the group and every
 *   recorded descendant; or, without /proc, the tree tree-kill finds and the group); then a bounded
 *   drain of the pipes. The result keeps the output written
 *   before it. A stop never signals a process the library did not start (docs/exec.md, "Safety").
 * - Without `token`, the ambient `activeToken()` (if any) binds the child. With a `signal` too, the
 *   child gets a child token of the ambient one: a stop of the turn still reaches it, and the
 *   signal is one more cause that stops this child alone.
 * - A `token` or `signal` already cancelled spawns nothing: the call rejects with `CancelledError`.
 *   So does a retired token (its turn has ended; a child started now would belong to no turn).
 * - Processes the child leaves behind once it has exited and closed its output are stopped the same
 *   way: a foreground child does not outlive its call. Use `spawnBackground` for those that should.
 *   One that still holds the output open 200 ms after the child's exit (`sleep 30 &`) does not
 *   hold the call: it settles with what arrived, `pipesHeldOpen: true`, and that process stays in
 *   the call's tree, which the turn's end or stop still ends (docs/exec.md, "Faults").
 * - The command runs only once the reaper knows it and nothing else of the call can fail: a host
 *   killed at any instant leaves no process and no cgroup behind (launcher.ts).
 *
 * Containment (`result.containment`, `execContainment()`): a cgroup of its own where the host allows
 * it, which a stop empties whatever its processes did; else the process group plus the descendants
 * found by walking /proc, where a double-forked daemon whose parent died before the stop is not
 * found and survives; where there is no /proc, the group and, at the hard stop, the tree
 * tree-kill finds (docs/exec.md).
 *
 * @example
 * // Inside a TurnRunner tool: the build's output reaches the UI as it is printed.
 * turn.tool('make', {}, (token, call) => exec('make', [], { token, onOutput: (c) => call.progress(c) }));
 * @example
 * const token = turns.beginTurn('s1');
 * const r = await exec('git', ['log', '-1'], { token, timeoutMs: 10_000 });
 * if (r.exitCode !== 0) return `git failed: ${r.stderr}`;
 */
export async function exec(file: string, args?: readonly string[], options?: ExecOptions): Promise<ExecResult> {
  let o = check(file, args, options);
  // Like TurnPool.run: inside a turn (runInTurn, a TurnRunner body or tool) the ambient token
  // binds the child, so every layer of the turn checks the same token (docs/design.md §1,
  // invariant 1). A signal adds a cause; it never cuts the child off from its turn.
  let ownToken: CancelToken | undefined;
  if (o.token === undefined) {
    const ambient = activeToken();
    if (ambient !== undefined) {
      refuseCancelled({ token: ambient, signal: undefined });
      if (o.signal !== undefined) ownToken = ambient.child();
      o = { ...o, token: ownToken ?? ambient };
    }
  }
  try {
    refuseCancelled(o);
  } catch (e) {
    ownToken?.retire();
    throw e;
  }
  const startedAt = performance.now();
  let spawned: ReturnType<typeof spawn>;
  try {
    spawned = spawn(o);
  } catch (e) {
    ownToken?.retire(); // the reaper could not be started: nothing was spawned
    throw e;
  }
  const { subprocess, tree, registration, start, failure } = spawned;
  if (failure !== undefined) {
    ownToken?.retire();
    throw await failure;
  }
  // From here nothing may fail with the child left running: whatever throws, its tree dies first.
  // (Until `begin`, the command has not even started: the launcher waits, launcher.ts.)
  let child: Child;
  try {
    child = new Child(subprocess, tree, registration, o, startedAt);
  } catch (e) {
    await killSpawned(subprocess, tree, registration);
    ownToken?.retire();
    throw e;
  }
  try {
    if (o.token !== undefined) child.onDone(own(o.token, child));
  } catch (e) {
    await child.hardStop();
    await child.settled;
    ownToken?.retire();
    throw e;
  }
  if (ownToken !== undefined) child.onDone(() => ownToken.retire());
  child.begin(start);
  return child.result;
}

/**
 * Register the child as an owner of its token (docs/design.md §1): its cancel starts the child's stop
 * (whose grace is decided then: a runner stop marks the tree governed before it cancels), a runner
 * stop awaits and hard-stops it, and the token's retirement ends it.
 */
function own(token: CancelToken, child: Child): () => void {
  return addOwner(token, {
    kind: 'process',
    settled: child.settled,
    onCancel: () => child.stop('cancel', isStopGoverned(token)),
    hardStop: () => child.hardStop().then(() => child.settled),
    onRetire: () => child.retire(),
  });
}

/** Nothing may start under a cancelled or ended turn: a `touch` would happen before any SIGTERM. */
export function refuseCancelled(o: Pick<Checked, 'token' | 'signal'>): void {
  o.token?.throwIfCancelled();
  if (o.token?.retired) {
    throw new CancelledError(`turn ${o.token.turnId ?? '(none)'} of session ${o.token.sessionId} has ended: nothing is spawned under a retired token`, {
      reason: o.token.reason, sessionId: o.token.sessionId, turnId: o.token.turnId,
    });
  }
  if (o.signal?.aborted) {
    throw new CancelledError(`options.signal is already aborted: nothing was spawned`, { reason: o.signal.reason });
  }
}
