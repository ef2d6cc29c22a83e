/**
 * Placeholder demo until the full agent-turn demo lands: a thread blocked in `sleep()` on a
 * turn's token wakes the moment the main thread stops the turn.
 */
import { Worker } from 'node:worker_threads';
import { TurnRegistry } from '../src/index.js';

const registry = new TurnRegistry();
const token = registry.beginTurn('demo', 'turn-1');
const runtime = new URL('../workers/runtime.js', import.meta.url).href;
const worker = new Worker(
  `import { workerData, parentPort } from 'node:worker_threads';
   const { tokenFromHandle } = await import(${JSON.stringify(runtime)});
   const token = tokenFromHandle(workerData);
   parentPort.postMessage('sleeping');
   const t0 = performance.now();
   try { token.sleep(60_000) } catch (e) { parentPort.postMessage({ woke: e.name }) }`,
  { eval: true, workerData: token.handle },
);
await new Promise<void>((resolve) => worker.once('message', () => resolve()));
const t0 = performance.now();
token.cancel('cancel.user');
const reply = await new Promise<{ woke: string }>((resolve) => worker.once('message', resolve));
console.log(`worker blocked in sleep(60 s) woke with ${reply.woke} ${((performance.now() - t0) * 1000).toFixed(0)} µs after cancel`);
await new Promise((resolve) => worker.once('exit', resolve));
registry.endTurn('demo', token);
console.log('registry after the turn:', registry.stats());
