/**
 * Spawning with node:child_process: each child detached (leader of its own group and session), no
 * shell of the caller's, output read by us (drain.ts), and no termination feature of anyone else's,
 * because the stop sequence here is the only one. The containment is the host's (containment.ts)
 * unless `options.containment` names one. (Plain `spawn` rather than execa: with every execa feature
 * off, what is left of it is the bookkeeping of its own result promise at the child's exit, which
 * is on the path of a stop, and the env merge and `input`, done below.)
 *
 * Order (launcher.ts): a place with the reaper is reserved first (starting the reaper), then, in
 * cgroup mode, the cgroup is made and its entry written; the child is spawned as the launcher,
 * which waits; in process-group mode its entry (pid and start time) is written right after the
 * spawn. The command runs only when the caller calls `start(true)`, after the reaper's handshake. In tree-kill mode (no /proc: the reaper cannot tell our processes from strangers') the
 * command is spawned directly, as is one whose environment the launcher cannot pass on exactly.
 */

import { spawn as spawnChild, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { accessSync, constants, statSync, writeFileSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { ToolError } from '../errors.js';
import { CgroupTree } from './cgroup.js';
import { cgroupDirectory, execContainment } from './containment.js';
import { createCgroup, removeCgroup } from './hierarchy.js';
import { ProcessGroupTree } from './group.js';
import { launcherArgv, letRun } from './launcher.js';
import { reserve, type Registration } from './reaper.js';
import { killLeader } from './rollback.js';
import type { Checked } from './options.js';
import type { Tree } from './tree.js';
import { TreeKillTree } from './tree-kill.js';

export type Subprocess = ChildProcess;

/** The spawned subprocess, its tree and its place with the reaper, or the `ToolError` of a spawn that failed (ENOENT, EACCES, ...). */
export type Spawned = {
  subprocess: Subprocess;
  tree: Tree;
  registration: Registration;
  /**
   * Let the command run (`true`), or never (`false`): call it once, after `registration.ready` and
   * when nothing else can fail (launcher.ts, invariant 1).
   */
  start: (run: boolean) => void;
  failure?: undefined;
} | { subprocess?: undefined; tree?: undefined; registration?: undefined; start?: undefined; failure: Promise<ToolError> };

/** How one child is spawned: directly (its own file), or through the launcher, joining `cgroup` first if given. */
type Launch = { mode: 'process-group' | 'tree-kill'; argv?: undefined; cgroup?: undefined } | { mode: 'process-group' | 'cgroup'; argv: string[]; cgroup?: string };

export function spawn(o: Checked): Spawned {
  const registration = reserve(); // the reaper is started before anything is spawned (or probed)
  try {
    const mode = o.containment === 'auto' ? execContainment() : o.containment;
    if (mode === 'tree-kill') return spawnIn(o, { mode }, registration);
    // The command runs through `sh`, whose own "not found" would be an exit code: find out first,
    // so a missing or non-executable command is the same ToolError in every mode.
    const problem = executableProblem(o);
    if (problem !== undefined) {
      registration.release();
      return { failure: Promise.resolve(failedToSpawn(o, problem)) };
    }
    return spawnIn(o, launch(o, mode, registration), registration);
  } catch (e) {
    registration.release();
    throw e;
  }
}

/** For a cgroup, the cgroup made for the child, its entry already written to the reaper. */
function launch(o: Checked, mode: 'process-group' | 'cgroup', registration: Registration): Launch {
  const withInput = o.input !== undefined;
  if (mode === 'process-group') {
    const argv = launcherArgv(undefined, o.file, o.args, childEnv(o), withInput);
    return argv === undefined ? { mode } : { mode, argv };
  }
  let cgroup: string;
  try {
    // Known to the reaper before it exists: a host killed right after the mkdir leaves none.
    cgroup = createCgroup(cgroupDirectory()!, (path) => registration.add(`cg ${path}`));
  } catch {
    return launch(o, 'process-group', registration); // the hierarchy went away since the probe: contain as we can
  }
  const argv = launcherArgv(cgroup, o.file, o.args, childEnv(o), withInput);
  if (argv === undefined) {
    // The launcher cannot pass this environment on exactly: contain this one as a process group.
    removeCgroup(cgroup);
    return { mode: 'process-group' };
  }
  return { mode, argv, cgroup };
}

function spawnIn(o: Checked, how: Launch, registration: Registration): Spawned {
  let subprocess: Subprocess;
  try {
    subprocess = how.argv === undefined ? spawnChild(o.file, o.args, spawnOptions(o, how)) : spawnChild('/bin/sh', how.argv, spawnOptions(o, how));
  } catch (e) {
    return failed(how, registration, Promise.resolve(spawnError(o, e)));
  }
  // A failed spawn has no pid and reports its errno in an 'error' event, a tick later.
  if (subprocess.pid === undefined) return failed(how, registration, new Promise<unknown>((r) => subprocess.once('error', r)).then((e) => spawnError(o, e)));
  try {
    subprocess.on('error', () => {}); // a later kill() of ours that fails is not the host's crash
    subprocess.stdin?.on('error', () => {}); // EPIPE: the child exited before reading `input`
    const tree = treeOf(subprocess.pid, how);
    if (how.cgroup === undefined) registration.add(tree.reaperEntry); // a cgroup's entry is written already
    return { subprocess, tree, registration, start: starter(subprocess, o, how) };
  } catch (e) {
    // Spawned, but not ready to be run: it dies before the failure surfaces (rollback.ts).
    return failed(how, registration, killLeader(subprocess, how.cgroup).then(() => spawnError(o, e)));
  }
}

function treeOf(pid: number, how: Launch): Tree {
  if (how.cgroup !== undefined) {
    // The launcher joins by itself before it waits; joining it from here as well makes it a member
    // before any stop can run, even if its shell has not been scheduled yet.
    try { writeFileSync(join(how.cgroup, 'cgroup.procs'), String(pid)); } catch { /* exited already */ }
    return new CgroupTree(pid, how.cgroup);
  }
  return how.mode === 'tree-kill' ? new TreeKillTree(pid) : new ProcessGroupTree(pid);
}

/** Release the reaper's place once `failure` is known (the cgroup, if any, removed first). */
function failed(how: Launch, registration: Registration, failure: Promise<ToolError>): Spawned {
  return {
    failure: failure.finally(() => {
      if (how.cgroup !== undefined) removeCgroup(how.cgroup);
      registration.release();
    }),
  };
}

/**
 * Spawned directly, the command runs already: only `input` is left to hand over. Through the
 * launcher: its go line (launcher.ts). Once.
 */
function starter(subprocess: Subprocess, o: Checked, how: Launch): (run: boolean) => void {
  let started = false;
  return (run) => {
    if (started) return;
    started = true;
    if (how.argv !== undefined) letRun(subprocess, run, o.input);
    else if (run && o.input !== undefined) subprocess.stdin!.end(o.input);
    else subprocess.stdin?.destroy();
  };
}

function spawnOptions(o: Checked, how: Launch): SpawnOptions {
  return {
    detached: true,
    shell: false,
    windowsHide: true,
    // The launcher's stdin carries its go line (launcher.ts), then `input`.
    stdio: [o.input === undefined && how.argv === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    env: childEnv(o),
    ...(o.cwd === undefined ? {} : { cwd: o.cwd }),
  };
}

/** `env` adds to (and overrides) the host's environment, as documented in options.ts. */
function childEnv(o: Checked): NodeJS.ProcessEnv {
  return o.env === undefined ? process.env : { ...process.env, ...o.env };
}

function spawnError(o: Checked, e: unknown): ToolError {
  const code = (e as { code?: unknown } | null)?.code;
  return failedToSpawn(o, typeof code === 'string' ? code : 'unknown error', e);
}

export function failedToSpawn(o: Checked, code: string, cause?: unknown): ToolError {
  const where = o.cwd === undefined ? '' : ` in ${JSON.stringify(o.cwd)}`;
  return new ToolError(`could not spawn ${JSON.stringify(o.file)}${where}: ${code}`, { cause });
}

/**
 * Why `o.file` cannot be spawned (ENOENT, EACCES), found without spawning: Node reports a failed
 * spawn only on the next tick, and `spawnBackground` must throw synchronously.
 */
export function probeSpawnError(o: Checked): string {
  return executableProblem(o) ?? 'EACCES';
}

/** ENOENT or EACCES as execvp would find them (same PATH, same cwd), or `undefined` when it would run. */
function executableProblem(o: Checked): string | undefined {
  const cwd = o.cwd ?? process.cwd();
  if (!isDirectory(cwd)) return 'ENOENT';
  const candidates = o.file.includes('/') ? [resolve(cwd, o.file)]
    : (o.env?.PATH ?? process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter).filter(Boolean)
      .map((dir) => join(isAbsolute(dir) ? dir : resolve(cwd, dir), o.file));
  if (candidates.some((path) => !isDirectory(path) && can(path, constants.X_OK))) return undefined;
  return candidates.some((path) => can(path, constants.F_OK)) ? 'EACCES' : 'ENOENT';
}

function isDirectory(path: string): boolean {
  try { return statSync(path).isDirectory(); } catch { return false; }
}

function can(path: string, mode: number): boolean {
  try { accessSync(path, mode); return true; } catch { return false; }
}
