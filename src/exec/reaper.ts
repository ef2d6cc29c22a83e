/**
 * The reaper: children never outlive the host, whatever kills it.
 *
 * SIGKILL cannot be caught, and SIGHUP or SIGQUIT kill a Node process without an 'exit' event, so
 * something outside the host must notice its death. The reaper is a small `sh` in a session of its
 * own (a signal to the host's group or terminal does not reach it), reading the host's
 * registrations from a pipe: `add <id> cg <cgroup>` / `add <id> pg <pid> <start>` / `del <id>`.
 * The pipe closes when the host dies, however it dies; then the reaper kills what is still
 * registered and exits:
 * - a cgroup: one write to `cgroup.kill`, wait for `populated 0`, remove the directory;
 * - a process group: only if the leader is still the process recorded (same start time, so the
 *   group -pid is still the child's, see group.ts rule 2): SIGSTOP the group, walk its
 *   descendants through /proc/<pid>/task/<tid>/children, SIGKILL the group and each of them.
 *
 * It changes nothing in the host: no signal handler, and the child process and its pipe are unref'd,
 * so the host exits exactly when it would without it. It runs only while children do: the host
 * closes the pipe after the last one settles, and the reaper, with nothing registered, just exits.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';

const SCRIPT = `
trap '' HUP INT QUIT PIPE
list=''
while IFS= read -r line; do
  case $line in
    'add '*) list="$list
\${line#add }" ;;
    'del '*)
      id=\${line#del }; kept=''
      while IFS= read -r entry; do
        [ -n "$entry" ] && [ "\${entry%% *}" != "$id" ] && kept="$kept
$entry"
      done <<EOF
$list
EOF
      list=$kept ;;
  esac
done
start_of() {
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  set -- \${stat##*) }
  echo "\${20}"
}
descendants() {
  for file in /proc/$1/task/*/children; do
    for kid in $(cat "$file" 2>/dev/null); do echo "$kid"; descendants "$kid"; done
  done
}
remove_cgroup() {
  for sub in "$1"/*/; do [ -d "$sub" ] && remove_cgroup "\${sub%/}"; done
  rmdir "$1" 2>/dev/null
}
printf '%s\n' "$list" | while IFS=' ' read -r id kind rest; do
  case $kind in
    cg)
      echo 1 > "$rest/cgroup.kill" 2>/dev/null
      tries=0
      while [ $tries -lt 200 ] && ! grep -q '^populated 0' "$rest/cgroup.events" 2>/dev/null; do
        [ -d "$rest" ] || break
        sleep 0.01; tries=$((tries + 1))
      done
      remove_cgroup "$rest" ;;
    pg)
      set -- $rest
      [ "$(start_of "$1")" = "$2" ] || continue
      kill -STOP "-$1" 2>/dev/null
      kids=$(descendants "$1")
      kill -KILL "-$1" 2>/dev/null
      for kid in $kids; do kill -KILL "$kid" 2>/dev/null; done ;;
  esac
done
`;

/** The reaper's `$0`: the last word of its command line. */
const REAPER_NAME = 'fullstop-reaper';

interface Reaper {
  readonly child: ChildProcess;
  readonly pipe: Socket;
}

/** The running reaper; `undefined` while no child is registered. */
let reaper: Reaper | undefined;
let registered = 0;
let nextId = 0;

/** Register `entry` (a `Tree.reaperEntry`) with the reaper, starting one if needed; returns the disposer. */
export function register(entry: string): () => void {
  const id = ++nextId;
  const r = (reaper ??= start());
  registered++;
  write(r, `add ${id} ${entry}\n`);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    write(r, `del ${id}\n`);
    if (--registered === 0 && reaper === r) {
      reaper = undefined;
      r.pipe.end();
    }
  };
}

/**
 * True when `pid` is a reaper of this library (its own or an earlier one still finishing): its
 * command line ends with REAPER_NAME. For tools that watch the host's children (the probe).
 */
export function isReaper(pid: number): boolean {
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
  // `$0` names it, so `ps` (and a test counting a tool's processes) can tell it from the tool's tree.
  const child = spawn('/bin/sh', ['-c', SCRIPT, REAPER_NAME], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  const pipe = child.stdin as Socket;
  // A reaper that failed to start or died early must not crash the host on its pipe's EPIPE.
  child.on('error', () => {});
  pipe.on('error', () => {});
  child.unref();
  pipe.unref();
  return { child, pipe };
}

function write(r: Reaper, line: string): void {
  if (!r.pipe.destroyed) r.pipe.write(line);
}
