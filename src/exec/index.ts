/**
 * `exec`: subprocess trees that really die. Each child is contained in a cgroup of its own where
 * the host allows it, else in its own process group with the identity rule, else (no /proc) in its
 * group plus the tree tree-kill finds; a stop sends SIGTERM, SIGKILL after the grace window, then
 * drains the pipes with a bound. See docs/exec.md.
 *
 * Files, one concern each: tree.ts (what a stop needs of a containment), containment.ts (which
 * one), cgroup.ts, group.ts and tree-kill.ts (the three, and every signal each sends), hierarchy.ts
 * (making, joining and removing a child's cgroup), sweep.ts (the process-group hard stop), grace.ts, output.ts (the output kept and `onOutput`), drain.ts (and the read after the exit), cleanup.ts (host exit) and reaper.ts (host death),
 * launcher.ts (no command runs unknown to the reaper), abort.ts and timeout.ts (causes), child.ts
 * (the stop sequence), spawn.ts (node:child_process),
 * exec.ts and background.ts (the public calls). The /proc reads and the descriptor kept for them
 * when the process has none left are ../base/proc.ts and ../base/fd-reserve.ts (the ledger's lock reads
 * /proc too).
 */

export { exec } from './exec.js';
export { spawnBackground, killAllBackground, type BackgroundProcess } from './background.js';
export { execContainment, type Containment } from './containment.js';
export type { ContainmentOption, ExecOptions } from './options.js';
export type { ExecResult } from './result.js';
export type { OnOutput, OutputChunk } from './output.js';
