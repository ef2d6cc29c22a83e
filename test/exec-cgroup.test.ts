/**
 * cgroup containment: where this host lets the process create a cgroup v2 (root on CI's machine),
 * each child runs in one of its own, joined before it can fork. A stop then reaches what no
 * process-group method can (a double-forked daemon whose parent is gone), the command is still
 * exactly the command (pid, argv[0], exit code, signal), and no cgroup is left behind.
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, execContainment, TurnRegistry, type CancelToken } from '../dist/src/index.js';
import { cgroupDirectory } from '../dist/src/exec/containment.js';
import { isGone } from './support/leaks.js';
import { closeScene, LIVENESS_MS, MODES, openScene, ownCgroups, pidsIn, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

function turn(): CancelToken {
  const token = registry.beginTurn('s');
  scene.tokens.push(token);
  return token;
}

const run = promisify(execFile);
const distExec = fileURLToPath(new URL('../dist/src/exec/index.js', import.meta.url));
/** As root, with setpriv, a process of uid 65534 that can read the library (a checkout under a private home cannot). */
const SETPRIV = ['--reuid=65534', '--regid=65534', '--clear-groups'];
const nobodyCanRun = process.getuid?.() === 0 && existsSync('/usr/bin/setpriv')
  && spawnSync('/usr/bin/setpriv', [...SETPRIV, 'test', '-r', distExec]).status === 0;
if (!nobodyCanRun) console.log('exec-cgroup: the not-root fallback test is skipped (needs root, setpriv, and a checkout readable by uid 65534)');
const cgroupOf = (pid: number) => /^0::(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))![1]!;
const available = MODES.some((m) => m.name === 'cgroup');

describe('execContainment()', () => {
  it('names the mode every result reports, and the option forces the fallback', async () => {
    const mode = execContainment();
    expect(['cgroup', 'process-group', 'tree-kill']).toContain(mode);
    expect((await exec('true')).containment).toBe(mode);
    expect((await exec('true', [], { containment: 'process-group' })).containment).toBe('process-group');
  });

  it.runIf(nobodyCanRun)('a process that may not create cgroups (not root) falls back to process-group, and its stops still work', async () => {
    const script = `const m = await import(${JSON.stringify(distExec)});
      const c = new AbortController();
      const running = m.exec('sleep', ['1000'], { signal: c.signal });
      c.abort();
      const r = await running;
      console.log(JSON.stringify({ probe: m.execContainment(), containment: r.containment, cancelled: r.cancelled, uid: process.getuid() }));`;
    const { stdout } = await run('/usr/bin/setpriv', [...SETPRIV, process.execPath, '--input-type=module', '-e', script], { timeout: 20_000 });
    expect(JSON.parse(stdout.trim())).toEqual({ probe: 'process-group', containment: 'process-group', cancelled: true, uid: 65534 });
  });

  it('an unknown containment option is a TypeError naming it, and nothing is spawned', async () => {
    const marker = join(scene.dir, 'touched');
    const refused = exec('touch', [marker], { containment: 'jail' as never });
    await expect(refused).rejects.toThrow(TypeError);
    await expect(refused).rejects.toThrow(/options\.containment: expected 'auto', 'process-group' or 'tree-kill', got "jail"/);
    expect(existsSync(marker)).toBe(false);
  });
});

/**
 * `sh -c '(setsid sh -c "sleep 1000 & ..." &); exec sleep 1000'`: the subshell exits at once, so the
 * daemon's sleep has left the child's session and group, and its ancestry no longer leads to the
 * child. Resolves once the daemon is running, with its sleep's pid.
 */
async function startDaemon(containment: 'auto' | 'process-group') {
  const files = join(scene.dir, 'pids');
  const script = `echo $$ > ${files}.leader; (setsid sh -c 'sleep 1000 & echo $! > ${files}.tmp && mv ${files}.tmp ${files}; wait' >/dev/null 2>&1 &); exec sleep 1000`;
  const token = turn();
  const running = exec('sh', ['-c', script], { token, containment });
  const [daemon] = await pidsIn(files);
  const [leader] = await pidsIn(`${files}.leader`);
  const stat = readFileSync(`/proc/${daemon}/stat`, 'utf8');
  const [, ppid, pgid, sid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  expect(pgid).not.toBe(leader);
  expect(sid).not.toBe(leader);
  expect(ppid).not.toBe(leader);
  return { daemon: daemon!, daemonShell: ppid!, running, token };
}

describe('process-group mode: the limit cgroups lift', () => {
  it('a double-forked daemon whose parent exited before the stop survives a process-group stop (documented)', async () => {
    const { daemon, daemonShell, running, token } = await startDaemon('process-group');
    token.cancel();
    expect(await running).toMatchObject({ cancelled: true, containment: 'process-group' });
    expect(isGone(daemon)).toBe(false);
    process.kill(daemon, 'SIGKILL');
    process.kill(daemonShell, 'SIGKILL');
  });
});

describe.runIf(available)('cgroup mode', () => {
  it('the child is in a cgroup of its own while it runs, and the cgroup is removed once it settles', async () => {
    const pidfile = join(scene.dir, 'pid');
    const token = turn();
    const running = exec('sh', ['-c', `echo $$ > ${pidfile}.tmp && mv ${pidfile}.tmp ${pidfile}; exec sleep 1000`], { token });
    const [pid] = await pidsIn(pidfile);
    const own = cgroupOf(pid!);
    expect(own).toMatch(new RegExp(`/fullstop-${process.pid}-\\d+$`));
    expect(ownCgroups()).toHaveLength(1);
    token.cancel();
    expect(await running).toMatchObject({ cancelled: true, containment: 'cgroup' });
    expect(ownCgroups()).toEqual([]);
  });

  it('a double-forked daemon whose parent exited before the stop is killed by the stop', async () => {
    const { daemon, running, token } = await startDaemon('auto');
    token.cancel();
    const result = await running;
    expect(isGone(daemon)).toBe(true);
    expect(result).toMatchObject({ cancelled: true, containment: 'cgroup' });
  });

  it('a daemon outside the group gets the SIGTERM too: it exits in the grace, and nothing is forced', async () => {
    // The daemon left the child's group and session, so the group's SIGTERM misses it: only the
    // search for the cgroup's other members (begun a few ms after the group's signal) reaches it.
    const files = join(scene.dir, 'daemon');
    const daemon = `trap 'echo term > ${files}.term; kill $s; exit 0' TERM; sleep 1000 & s=$!; echo $$ > ${files}.tmp && mv ${files}.tmp ${files}; wait`;
    const script = `(setsid sh -c "$0" >/dev/null 2>&1 &); exec sleep 1000`;
    const token = turn();
    const running = exec('sh', ['-c', script, daemon], { token, graceMs: 120_000 });
    const [shell] = await pidsIn(files);
    const t0 = performance.now();
    token.cancel();
    const result = await running;
    expect(result).toMatchObject({ cancelled: true, forced: false, containment: 'cgroup' });
    expect(readFileSync(`${files}.term`, 'utf8')).toBe('term\n');
    expect(isGone(shell!)).toBe(true);
    expect(performance.now() - t0).toBeLessThan(LIVENESS_MS); // the grace ended when the cgroup emptied, not at 120 s
  });

  it('the command is exactly the command: its pid, argv[0], exit code and signal', async () => {
    const pid = await exec('sh', ['-c', 'echo $$']);
    expect(Number(pid.stdout)).toBe(pid.pid);
    const argv0 = await exec(process.execPath, ['-e', 'process.stdout.write(process.argv0)']);
    expect(argv0.stdout).toBe(process.execPath);
    expect(await exec('sh', ['-c', 'exit 42'])).toMatchObject({ exitCode: 42, signal: null, containment: 'cgroup' });
    expect(await exec('sh', ['-c', 'kill -USR1 $$'])).toMatchObject({ exitCode: null, signal: 'SIGUSR1' });
    const viaPath = await exec('printf', ['%s|', 'a b', '$HOME', '-n']);
    expect(viaPath.stdout).toBe('a b|$HOME|-n|');
  });

  it('a root descendant that moves itself out of its cgroup escapes the stop (documented limit)', async () => {
    // It writes its pid to the host's own cgroup.procs (root may), and ignores SIGTERM.
    const ready = join(scene.dir, 'escaped');
    const escapee = `trap '' TERM; echo $$ > "$1/cgroup.procs" && echo $$ > "$2.tmp" && mv "$2.tmp" "$2" && while :; do sleep 1; done`;
    const token = turn();
    const running = exec('sh', ['-c', `sh -c "$0" escapee "$1" "$2" & exec sleep 1000`, escapee, cgroupDirectory()!, ready], { token, graceMs: 50 });
    const [pid] = await pidsIn(ready);
    expect(cgroupOf(pid!)).not.toMatch(/fullstop-/);
    token.cancel();
    expect(await running).toMatchObject({ cancelled: true, containment: 'cgroup' });
    try {
      expect(isGone(pid!)).toBe(false);
    } finally {
      process.kill(pid!, 'SIGKILL');
    }
  });

  it('a cgroup the child made inside its own (a nested host) is killed and removed with it', async () => {
    const ready = join(scene.dir, 'inner');
    const base = cgroupDirectory()!;
    const script = `cg="${base}/$(basename "$(sed -n 's/^0:://p' /proc/self/cgroup)")"; mkdir "$cg/inner" && sh -c 'echo $$ > "$1/inner/cgroup.procs"; echo $$ > "$2.tmp"; mv "$2.tmp" "$2"; exec sleep 1000' inner "$cg" ${ready} & wait`;
    const token = turn();
    const running = exec('sh', ['-c', script], { token });
    const [inner] = await pidsIn(ready);
    expect(cgroupOf(inner!)).toMatch(/\/fullstop-\d+-\d+\/inner$/);
    token.cancel();
    await running;
    expect(isGone(inner!)).toBe(true);
    expect(ownCgroups()).toEqual([]);
  });
});
