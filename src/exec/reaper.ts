/**
 * The reaper: children never outlive the host, whatever kills it.
 *
 * SIGKILL cannot be caught, and SIGHUP or SIGQUIT kill a Node process without an 'exit' event, so
 * something outside the host must notice its death. The reaper is a small `sh` in a session of its
 * own (a signal to the host's group or terminal does not reach it) whose stdin is a pipe from the
 * host, which closes when the host dies, however it dies. The host writes its registrations
 * (`add <id> cg <cgroup>` / `add <id> pg <pid> <start>` / `del <id>`) to a file, synchronously,
 * so one is made before `exec` returns on every runtime (Bun sends a pipe write only turns of the
 * event loop later: a host killed in between leaked the child). The file is unlinked as soon as
 * the reaper has it open (its fd 3): nothing is left on disk. When the pipe closes, the reaper
 * reads the file, kills what is still registered and exits.
 *
 * Nothing spawned is ever unknown to it (launcher.ts): a place is reserved (`reserve`, starting the
 * reaper) before each spawn; a cgroup's entry is written before the mkdir, a process group's right
 * after the spawn, while the child still waits; and the child runs its command only once the
 * reaper has said "ready" on its stdout (`Registration.ready`, the handshake).
 *
 * At scale (1,500 live children, or 1,000 live after 1,000 that ended) it kills within its 2 s:
 * - O(1) a registration, and a fast read: `awk` keeps the entries in an associative array and reads
 *   the file in blocks, so a long history costs little when the host dies (dash's `read` takes one
 *   byte per system call). Without awk, dash keeps each entry in a variable `e_<id>` (`add` sets
 *   it, `del` unsets it), and the host hands out ids from a free list, so the final pass over
 *   `e_1..e_max` is O(the most children registered at once).
 * - Kill first, then wait and clean up, with builtins (no fork a child):
 *   1. every cgroup gets its write of `1` to `cgroup.kill`;
 *   2. every process group whose leader is still the process recorded (same start time, read by
 *      one `awk` for all of them, so the group -pid is still the child's, see group.ts rule 2)
 *      goes through a pipeline: SIGSTOP the group; one more `awk` walks its descendants through
 *      /proc/<pid>/task/<pid>/children (the shell lists the other threads' of a multi-threaded
 *      process); SIGKILL each as soon as its own children have been read, the group last. The
 *      stages run at once, so the first groups die while the last are still being checked;
 *   3. wait until every cgroup says `populated 0` (2 s in all at most), then remove them all with
 *      one `rmdir`.
 *
 * It changes nothing in the host: no signal handler, and the child process and its pipe are unref'd,
 * so the host exits exactly when it would without it. It runs only while children do: the host
 * closes the pipe after the last one settles, and the reaper, with nothing registered, just exits.
 * (The file grows by a line a spawn and one a settle for as long as one reaper runs: ~100 bytes a
 * child.)
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { readStat } from '../base/proc.js';
import { ToolError } from '../errors.js';

const SCRIPT = `
trap '' HUP INT QUIT PIPE
nl='
'
# 0. The handshake: the host lets no command run before it has read this line.
echo ready
exec >/dev/null
# 1. Wait until the host's end of the pipe closes (it writes nothing to it); then read its
#    registrations from fd 3, in order: the entries still registered, one a line.
while read -r _; do :; done
if command -v awk >/dev/null; then
  entries=$(awk '$1 == "add" { e[$2] = substr($0, length($2) + 6) } $1 == "del" { delete e[$2] } END { for (id in e) print e[id] }' <&3)
else
  max=0
  while IFS= read -r line; do
    case $line in
      'add '*)
        rest=\${line#add }; id=\${rest%% *}
        eval "e_$id=\\\${rest#* }"
        [ "$id" -gt "$max" ] && max=$id ;;
      'del '*) unset "e_\${line#del }" ;;
    esac
  done <&3
  entries=''; i=1
  while [ $i -le $max ]; do
    eval "entry=\\\${e_$i-}"
    [ -n "$entry" ] && entries="$entries$nl$entry"
    i=$((i + 1))
  done
fi
set -f; IFS=$nl
set -- $entries
set +f; unset IFS
# "pid start" lines in, the pids whose process is still the one recorded out.
ours() {
  if command -v awk >/dev/null; then
    awk 'NF == 2 { f = "/proc/" $1 "/stat"; if ((getline s < f) > 0) { sub(/.*\\) /, "", s); split(s, a, " "); if ($1 > 1 && a[20] == $2) print $1 } close(f) }'
  else
    while read -r pid start; do
      [ -n "$pid" ] || continue
      read -r stat < "/proc/$pid/stat" || continue
      set -- \${stat##*) }
      [ "$pid" -gt 1 ] && [ "\${20}" = "$start" ] && echo "$pid"
    done
  fi
}
descend() {
  for file in /proc/$1/task/*/children; do
    line=''; read -r line < "$file"
    for kid in $line; do kids="$kids $kid"; descend "$kid"; done
  done
}
# Pids in, each group frozen (SIGSTOP) and passed on.
freeze() {
  while read -r pid; do kill -STOP "-$pid"; echo "$pid"; done
}
# Frozen leaders in; out, after each one's descendants (deepest first, each once its own children
# are read), the leader as "-<pid>" (its group). "t<pid>": a process with more than one thread,
# whose other threads' children the shell finds by listing /proc/<pid>/task (awk cannot).
walk() {
  if command -v awk >/dev/null; then
    awk 'function walk(p, f, s, a, line, n, i, kids) {
      f = "/proc/" p "/stat"; s = ""; getline s < f; close(f)
      if (s == "") return
      sub(/.*\\) /, "", s); split(s, a, " ")
      if (a[18] != 1) print "t" p
      f = "/proc/" p "/task/" p "/children"; line = ""; getline line < f; close(f)
      n = split(line, kids, " ")
      for (i = 1; i <= n; i++) { walk(kids[i]); print kids[i] }
    }
    { walk($1); print "-" $1 }'
  else
    while read -r pid; do echo "t$pid"; echo "-$pid"; done
  fi
}
# What walk names in, each SIGKILLed as it comes.
reap() {
  while read -r word; do
    case $word in
      t*) kids=''; descend "\${word#t}"; [ -n "$kids" ] && kill -KILL $kids ;;
      *) kill -KILL "$word" ;;
    esac
  done
}
populated() {
  while read -r key value; do
    [ "$key" = populated ] && { [ "$value" != 0 ]; return; }
  done < "$1/cgroup.events"
  return 1
}
collect() {
  for sub in "$1"/*/; do [ -d "$sub" ] && collect "\${sub%/}"; done
  dirs="$dirs$nl$1"
}
# 2. Kill first: every cgroup; then every group still ours, frozen, walked and killed, as a pipeline.
for entry; do
  case $entry in 'cg '*) echo 1 > "\${entry#cg }/cgroup.kill" ;; esac
done
for entry; do case $entry in 'pg '*) echo "\${entry#pg }" ;; esac; done | ours | freeze | walk | reap
# 3. Then wait for the cgroups to empty (2 s in all at most) and remove them, in one rmdir.
tries=0; dirs=''
for entry; do
  case $entry in
    'cg '*)
      cg=\${entry#cg }
      while [ $tries -lt 200 ] && [ -d "$cg" ] && populated "$cg"; do sleep 0.01; tries=$((tries + 1)); done
      collect "$cg" ;;
  esac
done
set -f; IFS=$nl
[ -n "$dirs" ] && rmdir $dirs 2>/dev/null
# 4. A child's launcher that joined its cgroup after the kill (the host died between the spawn and
#    the join) keeps it busy until it reads the closed pipe and exits: kill, then remove, again.
left=$dirs
while [ -n "$left" ] && [ $tries -lt 200 ]; do
  again=''
  for dir in $left; do [ -d "$dir" ] && again="$again$nl$dir"; done
  left=$again
  [ -n "$left" ] || break
  for dir in $left; do echo 1 > "$dir/cgroup.kill"; done 2>/dev/null
  sleep 0.01; tries=$((tries + 1))
  rmdir $left 2>/dev/null
done
`;

/** The reaper's `$0`: the last word of its command line. */
const REAPER_NAME = 'fullstop-reaper';

interface Reaper {
  readonly child: ChildProcess;
  /** The reaper's stdin: closes when the host dies. Nothing is written to it. */
  readonly pipe: Socket;
  /** The registrations file, written synchronously (already unlinked; the reaper reads it as fd 3). */
  readonly file: number;
  /** Resolves once the reaper has said "ready" (its script runs); rejects if it exited or failed first. */
  readonly ready: Promise<void>;
}

/**
 * One place in the reaper's registrations, taken before the spawn it covers (the reaper starts
 * then, if none runs): see `reserve`.
 */
export interface Registration {
  /**
   * Resolves once the reaper holding this place has confirmed that it runs (its handshake); rejects
   * with a `ToolError` if it could not start or died first. Nothing may run before (spawn.ts).
   */
  readonly ready: Promise<void>;
  /** Record what to kill if the host dies (a `Tree.reaperEntry`), written synchronously; a second call replaces it. */
  add(entry: string): void;
  /** Drop the entry (idempotent); the last place released stops the reaper. */
  release(): void;
}

/** The running reaper; `undefined` while no place is reserved. */
let reaper: Reaper | undefined;
let registered = 0;
/** The highest id handed out to the running reaper. */
let maxId = 0;
/**
 * Ids of deleted entries, handed out again first: the reaper's final pass runs over every id up to
 * the highest, so that stays the most children ever registered at once, not all there ever were.
 */
let freeIds: number[] = [];

/**
 * Reserve a place with the reaper, starting one if none runs: call it before spawning what the
 * entry will name, so that nothing spawned is ever unknown to a reaper already started.
 */
export function reserve(): Registration {
  const r = (reaper ??= start());
  const id = freeIds.pop() ?? ++maxId;
  registered++;
  let added = false;
  let done = false;
  return {
    ready: r.ready,
    add: (entry) => {
      if (done) throw new Error(`reaper entry ${id}: already released`);
      writeSync(r.file, `add ${id} ${entry}\n`);
      added = true;
    },
    release: () => {
      if (done) return;
      done = true;
      // Read in order: this `del` comes before any `add` that reuses the id. Should it fail, the
      // entry stays; at the host's death the reaper finds its process gone or not the one recorded.
      if (added) try { writeSync(r.file, `del ${id}\n`); } catch { /* see above */ }
      freeIds.push(id);
      if (--registered === 0) release(r);
    },
  };
}

function release(r: Reaper): void {
  if (reaper !== r) return;
  reaper = undefined;
  maxId = 0;
  freeIds = [];
  stop(r);
}

/**
 * True when `pid` is a reaper of this library (its own or an earlier one still finishing: its
 * command line ends with REAPER_NAME) or a helper one runs (its awk, once the host is gone). For
 * tools that watch the host's children (the probe, the tests' leak checks).
 */
export function isReaper(pid: number): boolean {
  if (namedReaper(pid)) return true;
  const parent = readStat(pid)?.ppid;
  return parent !== undefined && parent > 1 && namedReaper(parent);
}

function namedReaper(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').at(-2) === REAPER_NAME;
  } catch {
    return false;
  }
}

/** The pid of the running reaper, if any (tests use it to tell it from a leaked child). */
export function reaperPid(): number | undefined {
  return reaper?.child.pid;
}

function start(): Reaper {
  // Two descriptors on one new file: ours writes, the reaper's (its fd 3) reads from the start.
  const path = join(tmpdir(), `fullstop-reaper-${process.pid}-${randomBytes(6).toString('hex')}`);
  const file = openSync(path, 'wx', 0o600);
  let child: ChildProcess;
  try {
    const readEnd = openSync(path, 'r');
    try {
      // `$0` names it, so `ps` (and a test counting a tool's processes) can tell it from the tool's tree.
      child = spawn('/bin/sh', ['-c', SCRIPT, REAPER_NAME], { detached: true, stdio: ['pipe', 'pipe', 'ignore', readEnd] });
    } finally {
      closeSync(readEnd);
    }
  } catch (e) {
    closeSync(file);
    throw e;
  } finally {
    unlinkSync(path);
  }
  const pipe = child.stdin as Socket;
  let ready!: Promise<void>;
  try {
    // A reaper that failed to start or died early must not crash the host on its pipe's EPIPE.
    child.on('error', () => {});
    pipe.on('error', () => {});
    ready = handshake(child);
    child.unref();
    // Bun's pipe has no `unref` (docs/runtimes.md): there it stays referenced, which changes nothing
    // a user sees, since the pipe is open only while a child lives, and a live child keeps the host
    // alive anyway.
    if (typeof pipe.unref === 'function') pipe.unref();
  } catch (e) {
    closeSync(file);
    pipe.destroy(); // the reaper exits when its pipe closes with nothing registered
    child.stdout?.destroy();
    throw e;
  }
  return { child, pipe, file, ready };
}

/**
 * The reaper's "ready" line, read off its stdout (which it then closes): proof that its script
 * runs, set to kill what is registered once the pipe closes. Its 'error' (a failed spawn) or exit
 * before the line rejects. Handled here, so that a rejection nobody awaits is not unhandled.
 */
function handshake(child: ChildProcess): Promise<void> {
  const out = child.stdout!;
  const ready = new Promise<void>((resolve, reject) => {
    const fail = (why: string) => () => reject(new ToolError(`the reaper (which kills children if the host dies) did not start: ${why}; nothing was run`));
    out.once('data', () => resolve());
    out.once('end', fail('it exited before its handshake'));
    out.once('error', fail('its output failed'));
    child.once('error', (e) => reject(new ToolError(`the reaper (which kills children if the host dies) could not be spawned: ${(e as NodeJS.ErrnoException).code ?? e.message}; nothing was run`, { cause: e })));
  });
  // Its stdout is read only for the handshake; unref'd, it never holds the host (Bun has no unref: there it ends with the line).
  if (typeof (out as Socket).unref === 'function') (out as Socket).unref();
  out.on('error', () => {});
  ready.catch(() => {});
  return ready;
}

/**
 * Close the registrations, then the pipe: the reaper reads what was written, finds nothing left,
 * and exits. Nothing is ever written to the pipe, so `destroy` loses nothing, and closes its
 * descriptor now (`end` would close it loop turns later, after the child's result has resolved).
 */
function stop(r: Reaper): void {
  closeSync(r.file);
  r.pipe.destroy();
  r.child.stdout?.destroy(); // before its handshake, if it has not come yet
}
