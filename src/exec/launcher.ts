/**
 * The launcher: how a child starts so that no instant exists in which it runs unknown to the
 * reaper (reaper.ts), whatever kills the host and when.
 *
 * A spawn and the reaper's record of it cannot be one step: the pid (process-group mode) is known
 * only once the spawn returns, and a host killed in between would leave a child nothing kills. So
 * the child starts as `/bin/sh`, which (in cgroup mode) joins its cgroup, then blocks reading one
 * line of its stdin, and only then execs the command, in the same process (same pid, start time,
 * argv, exit code and signal as the command's own):
 *
 *     sh -c '[join the cgroup;] IFS= read -r fullstop_go || exit 125; exec "$0" "$@"' file args...
 *
 * Invariants:
 * 1. The host writes that line (`letRun`) only once the reaper has confirmed that it runs and the
 *    child's entry is written to it, and after everything else that can fail in `exec` has
 *    succeeded: the command runs only when the reaper would kill it.
 * 2. A host that dies before closes the pipe: `read` gets end of file and the launcher exits
 *    without running anything (125). It has forked nothing, so nothing is left.
 * 3. The reaper also kills and removes a cgroup the launcher joined after the reaper had killed it
 *    (the host died between the spawn and the join): the launcher exits by (2), the cgroup empties.
 * 4. `read` takes its line a byte at a time from a pipe (POSIX: it never reads past the newline),
 *    so `input`, written after it, reaches the command whole; without `input`, the command's stdin
 *    is /dev/null, as with `stdio: 'ignore'`.
 * Variables whose names are not shell identifiers (`spring.profiles.active`, `FOO-BAR`), which the
 * shell would drop, are handed to `env` as `NAME=VALUE` arguments instead: it sets them back and
 * execs the command, so the command sees the environment it would see uncontained. `undefined` when
 * that cannot be exact: `env` would take a command containing `=` for one more variable (or there
 * is no `/usr/bin/env`); exec then spawns the command directly (spawn.ts).
 */

import { existsSync } from 'node:fs';
import { joinLine } from './hierarchy.js';
import type { ChildProcess } from 'node:child_process';

/** Names a POSIX shell passes on to what it execs; dash drops every other one from the environment. */
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Sets the variables the shell would drop, then execs the command. */
const ENV = '/usr/bin/env';
/** The launcher's exit code when the host went away before letting it run (invariant 2). */
export const NOT_RUN_EXIT_CODE = 125;

/** The argv of `/bin/sh` that joins `cgroup` (if any), waits for `letRun`, then becomes `file args...`. */
export function launcherArgv(cgroup: string | undefined, file: string, args: readonly string[], env: NodeJS.ProcessEnv, withInput: boolean): string[] | undefined {
  const dropped: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && !SHELL_NAME.test(name)) dropped.push(`${name}=${value}`);
  }
  const join = cgroup === undefined ? '' : `${joinLine(cgroup)}; `;
  const stdin = withInput ? '' : ' </dev/null';
  // Read into a name of its own: a variable of the environment (`_` is one) would be changed for the command.
  const wait = `IFS= read -r fullstop_go || exit ${NOT_RUN_EXIT_CODE}`;
  if (dropped.length === 0) return ['-c', `${join}${wait}; exec "$0" "$@"${stdin}`, file, ...args];
  if (file.includes('=') || !existsSync(ENV)) return undefined;
  return ['-c', `${join}${wait}; exec ${ENV} "$@"${stdin}`, 'sh', ...dropped, file, ...args];
}

/**
 * Let the launcher exec the command (`run`), then hand it `input`; or (`!run`) close its stdin, so
 * that it exits without running anything (invariant 2).
 */
export function letRun(subprocess: ChildProcess, run: boolean, input: string | undefined): void {
  const stdin = subprocess.stdin!;
  if (!run) {
    stdin.destroy();
    return;
  }
  stdin.write('\n');
  if (input === undefined) stdin.end();
  else stdin.end(input);
}
