// P5's variants, each in a node process of its own (docs/benchmarks.md, "What each row does"): pool-reuse.bench.ts forks this
// file once a variant, sends it a task count a round and gets the round's tasks/s back. In one process the five pools shared a heap
// and the JIT's feedback on piscina's code, and TurnPool's rate moved with the other pools' rounds; a server runs one of them.
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { TurnPool, TurnRegistry, type CancelToken } from '../src/index.js';
import { TASKS } from './handshake.js';
import { assertNothingLive, withTurn } from './harness.js';

export const IN_FLIGHT = 100;
const one = { filename: TASKS, name: 'trivial', minThreads: 2, maxThreads: 2 };
const four = { ...one, concurrentTasksPerWorker: 4 };
type Submit = (i: number, token: CancelToken) => Promise<unknown>;
/** Each variant: its pool, and how it submits task `i` of a round run under `token`. */
export const VARIANTS: Record<string, () => [Piscina, Submit]> = {
  raw: () => { const p = new Piscina(one); return [p, (i) => p.run(i)]; },
  token: () => { const p = new TurnPool(one); return [p, (i, token) => p.run(i, { token })]; },
  plain: () => { const p = new TurnPool(one); return [p, (i) => p.run(i)]; },
  raw4: () => { const p = new Piscina(four); return [p, (i) => p.run(i)]; },
  token4: () => { const p = new TurnPool(four); return [p, (i, token) => p.run(i, { token })]; },
};

/** Tasks/s for `total` tasks with IN_FLIGHT in flight (a completion submits the next), all under one turn. */
function drive(registry: TurnRegistry, submit: Submit, total: number): Promise<number> {
  return withTurn(registry, 'p5', async (token) => {
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      let [submitted, done] = [0, 0];
      const next = (i = submitted++): unknown => submit(i, token).then((value) => {
        if (value !== i) return reject(new Error(`P5: task ${i} returned ${String(value)}`));
        if (++done === total) resolve();
        else if (submitted < total) next();
      }, reject);
      for (let k = 0; k < Math.min(IN_FLIGHT, total); k++) next();
    });
    return total / ((performance.now() - t0) / 1000);
  });
}

// The child: `node throughput.js VARIANT`; a message { total } runs a round and answers { rate } (or { error }); 'exit' ends it.
if (process.send !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [pool, submit] = VARIANTS[process.argv[2]!]!();
  const registry = new TurnRegistry();
  process.on('message', (message: { total: number } | 'exit') => {
    if (message === 'exit') return void pool.destroy().then(() => process.disconnect());
    drive(registry, submit, message.total).then((rate) => {
      assertNothingLive(registry, `P5 ${process.argv[2]}`);
      return { rate };
    }).catch((error: unknown) => ({ error: String((error as Error)?.stack ?? error) })).then((reply) => process.send!(reply));
  });
  process.send({ ready: true });
}
