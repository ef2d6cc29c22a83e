/**
 * `npm start`: one agent turn, stopped for real, everywhere at once.
 *
 * The turn streams a reply (a local async generator standing in for a model), runs a CPU-heavy
 * tool in a TurnPool worker, runs a process tree through `exec`, and waits on a question. Once
 * every layer is running (a handshake with each), `--stop-after` ms later the turn is stopped; the demo prints each layer as it acknowledges, the
 * StopReport and the ledger tail. A second turn then runs to completion and shows the marker in
 * its history, and that nothing leaked.
 *
 * Flags: --stop-after MS (300), --grace MS (100), --json (one machine-readable report on stdout),
 * --fleet (the stop across two server instances over Redis instead: examples/fleet-demo.ts).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  exec, isCancelledError, Ledger, TurnPool, TurnRegistry, TurnRunner, type ExecResult, type Turn,
} from '../src/index.js';
// The library's own /proc reader (internal, not part of the public API): gone = no process or a zombie.
import { isDead, readStat } from '../src/base/proc.js';

// `--fleet` is a demo of its own (two processes and Redis); it takes over before the flags below.
if (process.argv.includes('--fleet')) {
  const { runFleetDemo } = await import('./fleet-demo.js');
  process.exit(await runFleetDemo(process.argv.slice(2).filter((a) => a !== '--fleet')));
}

function options(): { stopAfter: number; graceMs: number; json: boolean } {
  const { values } = parseArgs({
    options: { 'stop-after': { type: 'string', default: '300' }, grace: { type: 'string', default: '100' }, json: { type: 'boolean', default: false } },
  });
  const stopAfter = Number(values['stop-after']);
  const graceMs = Number(values.grace);
  if (!Number.isFinite(stopAfter) || stopAfter < 0) throw new RangeError(`--stop-after: expected milliseconds >= 0, got ${values['stop-after']}`);
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new RangeError(`--grace: expected milliseconds >= 0, got ${values.grace}`);
  return { stopAfter, graceMs, json: values.json === true };
}
let parsed: ReturnType<typeof options>;
try {
  parsed = options();
} catch (error) {
  console.error(`demo: ${(error as Error).message}\nusage: npm start -- [--stop-after MS] [--grace MS] [--json]`);
  process.exit(2);
}
const { stopAfter, graceMs } = parsed;
const json = parsed.json;
const say = (line: string) => { if (!json) console.log(line); };

// The demo promises to end within 60 s: if it has not after 50, say what is still alive.
setTimeout(() => {
  console.error(`demo: still running after 50 s; registry ${JSON.stringify(registry.stats())}; resources ${JSON.stringify(process.getActiveResourcesInfo())}`);
  process.exit(1);
}, 50_000).unref();

const dir = mkdtempSync(join(tmpdir(), 'fullstop-demo-'));
const registry = new TurnRegistry();
const pool = new TurnPool({ filename: new URL('./tools/crunch.js', import.meta.url).href, minThreads: 1, maxThreads: 1 });
const ledger = await Ledger.open(join(dir, 'history.jsonl'));
const runner = new TurnRunner({ registry, pool, ledger, graceMs });

/** Moments each layer acknowledged the stop, in ms since the stop request. */
const timeline: { layer: string; ms: number }[] = [];
let stopAt = 0;
const mark = (layer: string, at = performance.now()) => { timeline.push({ layer, ms: at - stopAt }); };
const printTimeline = () => {
  // Some layers report a moment they saw earlier (the worker stamps its own notice), so sort.
  for (const { layer, ms } of timeline.sort((a, b) => a.ms - b.ms)) {
    say(`  +${ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`}  ${layer}`);
  }
};

/** A model that streams a token every 20 ms until its signal aborts. */
async function* model(signal: AbortSignal): AsyncGenerator<string> {
  const words = 'Let me look at the repository, crunch the numbers and run the build for you.'.split(' ');
  for (let i = 0; ; i++) {
    // An abort that landed while the caller was busy with the last chunk has already fired: a
    // listener added now would never run, and the stream would go on for ever.
    signal.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => { clearTimeout(t); reject(signal.reason); };
      const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, 20);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    yield `${words[i % words.length]} `;
  }
}

const notice = new Float64Array(new SharedArrayBuffer(16));
const crunching = new Int32Array(new SharedArrayBuffer(4));
const treeFile = join(dir, 'tree.pids');
let tree: ExecResult | undefined;
let asked!: () => void;
const questionAsked = new Promise<void>((resolve) => { asked = resolve; });
runner.once('question', () => asked());

async function firstTurn(turn: Turn): Promise<void> {
  turn.signal.addEventListener('abort', () => mark('token.signal aborted (main-thread awaits unwind)'), { once: true });
  const reply = (async () => {
    try {
      for await (const chunk of model(turn.signal)) await turn.say(chunk);
    } catch (e) {
      if (isCancelledError(e)) mark('model stream unwound');
      throw e;
    }
  })();
  const cpu = turn.tool('crunch', { phases: 1000 }, (token) => pool.run({ phases: 1000, notice, started: crunching }, { token }))
    .catch((e) => { if (notice[0]) mark('worker saw the stop in checkpoint()', notice[0] - performance.timeOrigin); throw e; });
  const shell = turn.tool('build', { cmd: 'sh -c "sleep 30 & sleep 30 & sh -c \'sleep 30\' & wait"' }, async (token) => {
    // The tree of five writes its pids to a file, then "ready": the demo's handshake with it.
    const script = 'sleep 30 & echo $! >> "$1"; sleep 30 & echo $! >> "$1"; '
      + 'sh -c \'sleep 30 & echo $! >> "$1"; echo $$ >> "$1"; echo ready >> "$1"; wait\' nested "$1" & wait';
    tree = await exec('sh', ['-c', script, 'tree', treeFile], { token });
    mark(`process tree gone (${tree.forced ? 'SIGKILL' : 'SIGTERM'}, pid ${tree.pid})`);
    return tree;
  });
  const question = turn.ask('Deploy to production?').catch((e) => { mark('pending question rejected'); throw e; });
  await Promise.all([reply, cpu, shell, question]);
}

say(`fullstop demo — turn 1 streams a reply, crunches in a worker, runs a process tree and asks a question; stop ${stopAfter} ms after all are running (grace ${graceMs} ms)\n`);
const first = runner.run('demo', firstTurn, { turnId: 'turn-1' });
// Every layer running first: the worker has taken the crunch task, the question is out.
const workerBusy = Atomics.waitAsync(crunching, 0, 0, 30_000);
await Promise.race([
  Promise.all([workerBusy.async ? workerBusy.value : undefined, questionAsked, treeReady()]),
  first.then((o) => { throw new Error(`demo: turn 1 ended (${o.status}: ${String('error' in o ? o.error : '')}) before every layer was running`); }),
]);
await new Promise((r) => setTimeout(r, stopAfter));
say('stop requested:');
stopAt = performance.now();
const report = await runner.stop('demo', { reason: 'cancel.user' });
mark('turn_aborted emitted (ledger flushed)');
const outcome = await first;
printTimeline();

const treePids = tree === undefined ? [] : [tree.pid, ...readFileSync(treeFile, 'utf8').split('\n').filter((l) => /^\d+$/.test(l)).map(Number)];
const survivors = treePids.filter((pid) => alive(pid));
const tail = readFileSync(ledger.path, 'utf8').trim().split('\n').slice(-6).map((l) => JSON.parse(l));

const second = await runner.run('demo', async (turn) => {
  await turn.say('Picking up where we stopped.');
  return turn.tool('crunch', { phases: 1 }, (token) => pool.run({ phases: 1, notice: new Float64Array(new SharedArrayBuffer(16)) }, { token }));
}, { turnId: 'turn-2' });
const history = await ledger.entries({ sessionId: 'demo' });
const markerSeen = history.some((e) => e.type === 'turn_aborted' && e.turnId === 'turn-1');
await pool.destroy();
await ledger.close();
rmSync(dir, { recursive: true, force: true });
const stats = registry.stats();

if (json) {
  console.log(JSON.stringify({
    status: outcome.status, report, timeline, survivors, treePids, stats, poolStats: pool.stats(),
    secondTurn: { status: second.status, markerInHistory: markerSeen },
  }, null, 2));
} else {
  console.log(`\nturn 1: ${outcome.status}\nStopReport: ${JSON.stringify(report, null, 2)}`);
  console.log('\nledger tail:');
  for (const e of tail) console.log(`  #${e.seq} ${e.type}${e.status ? ` ${e.status}` : ''}${e.output ? ` ${JSON.stringify(e.output)}` : ''}${e.text ? ` ${JSON.stringify(e.text).slice(0, 70)}` : ''}`);
  console.log(`\nturn 2: ${second.status}; its history shows turn 1's marker: ${markerSeen}`);
  console.log(`process tree ${treePids.join(', ')}: ${survivors.length === 0 ? 'all gone' : `SURVIVORS ${survivors.join(', ')}`}`);
  console.log(`registry after both turns: ${JSON.stringify(stats)}`);
}
process.exitCode = outcome.status === 'cancelled' && survivors.length === 0 && second.status === 'completed' ? 0 : 1;

/** Resolves once the process tree wrote "ready" (a file handshake; polled, bounded). */
async function treeReady(): Promise<void> {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 2))) {
    try {
      if (readFileSync(treeFile, 'utf8').includes('ready')) return;
    } catch { /* not written yet */ }
  }
  throw new Error('demo: the process tree did not start within 30 s');
}

function alive(pid: number): boolean {
  return !isDead(readStat(pid));
}
