// exec's promises on this runtime, in every containment the host offers: a stop ends the whole
// tree (SIGTERM, then SIGKILL after the grace) and no pid survives the result; a failure after the
// spawn kills the tree before it surfaces; children die with the host however it dies; the rule
// process-group mode stands on holds (the leader is never reaped before its 'exit' reaches us).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exec, execContainment, TurnRegistry } from '../../dist/src/index.js';
import { isReaper } from '../../dist/src/exec/reaper.js';
import { cgroupDirectory } from '../../dist/src/exec/containment.js';
import { assert, check, done, eventually, fixture, isGone, LIVENESS_MS, noLeaks, sameRuntime, treeOfFive } from './harness.mjs';

const registry = new TurnRegistry();
const dir = mkdtempSync(join(tmpdir(), 'fullstop-runtime-exec-'));
const modes = [...new Set([execContainment(), 'process-group'])];
/** Host deaths a check of the spawn window makes (each costs a runtime's start-up). */
const RANDOM_KILLS = 10;
let n = 0;
const pidfile = () => join(dir, `tree-${++n}`);
const allGone = (pids) => pids.every(isGone);

for (const containment of modes) {
  const option = containment === 'cgroup' ? 'auto' : containment;
  check(`exec (${containment}): a cancel stops the tree of five, none survives the result`, async () => {
    const token = registry.beginTurn('s');
    const file = pidfile();
    const running = exec('sh', [fixture('exec/tree-of-five.sh'), file], { token, containment: option, graceMs: 10_000 }); // it obeys SIGTERM: never forced, however loaded the machine
    const pids = await treeOfFive(file);
    token.cancel('cancel.user');
    const result = await running;
    registry.endTurn('s', token);
    assert.equal(result.containment, containment);
    assert.equal(result.cancelled, true);
    assert.equal(result.forced, false);
    assert.ok(allGone(pids), `alive: ${pids.filter((p) => !isGone(p))}`);
  });

  check(`exec (${containment}): a tree that ignores SIGTERM is hard-stopped after graceMs, none survives`, async () => {
    const token = registry.beginTurn('s');
    const file = pidfile();
    const running = exec('sh', [fixture('exec/ignores-term.sh'), file], { token, containment: option, graceMs: 200 });
    const pids = await treeOfFive(file);
    token.cancel('cancel.user');
    const result = await running;
    registry.endTurn('s', token);
    assert.equal(result.cancelled, true);
    assert.equal(result.forced, true);
    assert.ok(allGone(pids), `alive: ${pids.filter((p) => !isGone(p))}`);
  });

  check(`exec (${containment}): a failure after the spawn surfaces only once what was spawned is dead, the command never run`, async () => {
    const file = pidfile();
    const injected = new Error('injected after the spawn');
    let spawned = [];
    // A fault in registering a listener, once the child is spawned (waiting to run: src/exec/launcher.ts):
    // exec adds its abort listener to the signal after the spawn. (Bun reports a throwing
    // 'newListener' listener instead of throwing it.)
    const signal = new AbortController().signal;
    signal.addEventListener = () => {
      spawned = ownChildren();
      throw injected;
    };
    const error = await exec('sh', [fixture('exec/ignores-term.sh'), file], { signal, containment: option }).then(() => undefined, (e) => e);
    assert.equal(error, injected);
    assert.ok(spawned.length >= 1, 'nothing spawned');
    // Bun may return from a spawn before the child has exec'd: the reaper, just started, could not
    // be told by its command line then. It can now (or it is gone).
    const alive = spawned.filter((pid) => !isGone(pid) && !isReaper(pid));
    assert.deepEqual(alive, [], `alive when the error surfaced: ${alive}`);
    assert.ok(!isReady(file), 'the command ran');
  });

  for (const how of ['exit', 'SIGKILL']) {
    check(`exec (${containment}): the host ${how === 'exit' ? 'calls process.exit()' : 'is SIGKILLed'} with live children, none survives it`, async () => {
      const file = pidfile();
      const [command, args] = sameRuntime(fixture('exec/host-exits-with-children.mjs'), how === 'exit' ? 'exit' : 'wait', file);
      const env = { ...process.env, FULLSTOP_CONTAINMENT: containment === 'process-group' ? 'process-group' : '' };
      const host = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
      let out = '';
      host.stdout.on('data', (chunk) => { out += chunk; });
      const exited = new Promise((resolve) => host.once('exit', resolve));
      await eventually(() => /^reaper \d+$/m.test(out), LIVENESS_MS, `the host to be ready (${out})`);
      const pids = /^ready (.*)$/m.exec(out)[1].split(' ').map(Number);
      if (how === 'SIGKILL') host.kill('SIGKILL');
      await exited;
      await eventually(() => allGone(pids), 2000, `every child gone within 2 s of the host (alive: ${pids.filter((p) => !isGone(p))})`);
    });
  }

  check(`exec (${containment}): the host is SIGKILLed before its event loop turns once after the spawn, none survives it`, async () => {
    const file = pidfile();
    const [command, args] = sameRuntime(fixture('exec/host-killed-at-spawn.mjs'), file);
    const env = { ...process.env, FULLSTOP_CONTAINMENT: containment === 'process-group' ? 'process-group' : '' };
    const host = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
    let out = '';
    host.stdout.on('data', (chunk) => { out += chunk; });
    await new Promise((resolve) => host.once('exit', resolve));
    const ready = /^ready (.*)$/m.exec(out);
    assert.ok(ready, `the host did not get ready: ${out}`);
    const pids = ready[1].split(' ').map(Number);
    assert.ok(pids.length >= 1, 'nothing spawned'); // the reaper too on Bun, if it had not exec'd yet
    await eventually(() => allGone(pids), 2000, `every child gone within 2 s of the host (alive: ${pids.filter((p) => !isGone(p))})`);
    assert.ok(!isReady(file), 'the command ran');
  });
}

for (const containment of modes) {
  const option = containment === 'cgroup' ? 'auto' : containment;
  check(`exec (${containment}): the host SIGKILLed at a random 0–60 ms into a spawn-and-stop loop, ${RANDOM_KILLS} times: no survivor, no cgroup left`, async () => {
    const survivors = [];
    for (let i = 0; i < RANDOM_KILLS; i++) {
      const tag = `${process.pid}-${containment}-${i}`;
      const [command, args] = sameRuntime(fixture('exec/host-dies-spawning.mjs'), 'loop', option, tag);
      const host = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise((resolve) => host.once('exit', resolve));
      let out = '';
      host.stdout.on('data', (chunk) => { out += chunk; });
      await eventually(() => /^go$/m.test(out), LIVENESS_MS, `the host to start (${out})`);
      await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 61)));
      host.kill('SIGKILL');
      await exited;
      try {
        await eventually(() => tagged(tag).length === 0 && cgroupsOf(host.pid).length === 0, 5000, 'nothing of the host left');
      } catch {
        survivors.push(`${tag}: processes ${tagged(tag)}, cgroups ${cgroupsOf(host.pid)}`);
        for (const pid of tagged(tag)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      }
    }
    assert.deepEqual(survivors, []);
  });
}

if (process.versions.deno !== undefined) {
  check('exec (deno without --allow-all): /proc is refused, said once as a FullstopRuntimeWarning; the tree is still stopped (tree-kill mode)', async () => {
    const host = spawn(process.execPath, ['run', '--allow-run', '--allow-read', '--allow-write', '--allow-env', fixture('exec/stop-and-report.mjs'), dir],
      { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, NO_COLOR: '1' } });
    let out = '';
    host.stdout.on('data', (chunk) => { out += chunk; });
    await new Promise((resolve) => host.once('exit', resolve));
    const report = JSON.parse(out.trim().split('\n').at(-1));
    assert.deepEqual(report.warnings, [{ name: 'FullstopRuntimeWarning', code: 'FULLSTOP_PROC_REFUSED' }]);
    assert.deepEqual([report.containment, report.cancelled, report.forced], ['tree-kill', true, true]);
    await eventually(() => allGone(report.pids), 2000, `the tree gone (alive: ${report.pids.filter((p) => !isGone(p))})`);
  });
}

check('exec: plain output and exit code', async () => {
  const result = await exec('sh', ['-c', 'printf out; printf err >&2; exit 3']);
  assert.deepEqual([result.exitCode, result.stdout, result.stderr], [3, 'out', 'err']);
});

check("exec: the leader is never reaped before its 'exit' reaches JavaScript (process-group mode's safety rule)", async () => {
  for (let i = 0; i < 10; i++) {
    const child = spawn('sh', ['-c', 'exit 0'], { detached: true, stdio: 'ignore' });
    let exited = false;
    child.once('exit', () => { exited = true; });
    // Between callbacks and inside a synchronous run alike, an unreaped leader is still in /proc.
    while (!exited) {
      const spinUntil = performance.now() + 2;
      while (performance.now() < spinUntil) assert.ok(exited || procExists(child.pid), `pid ${child.pid} reaped before its 'exit' event`);
      await new Promise((r) => setImmediate(r));
      assert.ok(exited || procExists(child.pid), `pid ${child.pid} reaped before its 'exit' event`);
    }
  }
});

check('exec: no leaks (no child, no cgroup, no token left)', async () => {
  await noLeaks(registry);
  rmSync(dir, { recursive: true, force: true });
});

function isReady(path) {
  try { readFileSync(path); return true; } catch { return false; }
}

/** Live processes whose environment carries `tag` (host-dies-spawning.mjs tags every command). */
function tagged(tag) {
  const needle = `FULLSTOP_SURVIVOR_TAG=${tag}\0`;
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).filter((name) => {
    try { return readFileSync(`/proc/${name}/environ`, 'latin1').includes(needle); } catch { return false; }
  }).map(Number);
}

/** The cgroups host `pid` made that nobody removed. */
function cgroupsOf(pid) {
  const base = cgroupDirectory();
  return base === undefined ? [] : readdirSync(base).filter((name) => name.startsWith(`fullstop-${pid}-`));
}

/** This process's live children but the reaper (a child of an earlier check may be a zombie yet). */
function ownChildren() {
  return readdirSync('/proc/self/task')
    .flatMap((task) => readFileSync(`/proc/self/task/${task}/children`, 'utf8').trim().split(' '))
    .filter(Boolean).map(Number).filter((pid) => !isReaper(pid) && !isGone(pid));
}

function procExists(pid) {
  try { readFileSync(`/proc/${pid}/stat`); return true; } catch { return false; }
}

await done('exec');
