// I-*: a stop mid-tool in an app on each framework (integrations-apps.ts), fullstop against the same
// app with plain Piscina `signal` + `child_process`. Per framework: stop → the tool's worker loop
// over (fullstop: its task settled, the loop having thrown at its check; Piscina: its terminated
// thread gone from /proc/self/task), and stop → the framework's own promise settled (for MCP: stop
// → the client's next call answered, where plain Piscina first respawns its worker). The process
// tree's survivors are counted per side (extra) and SIGKILLed after each sample.
import { agentsApp, aiApp, langgraphApp, mcpApp, type App, type Side } from './integrations-apps.js';
import { now } from './handshake.js';
import { assertNothingLive, compare, samplePairs, suiteOf, type BenchResult, type SuiteContext } from './harness.js';
import { alive, reap } from './trees.js';

const BASELINE = 'piscina signal + child_process';
const msSince = (t0: bigint, t1: bigint) => Number(t1 - t0) / 1e6;


type Sample = { loopMs: number; endMs: number; survivors: number };

/** One run: start, stop, then the end (`'settled'`: the framework's promise; `'next'`: the next call answered). */
async function sample(app: App, end: 'settled' | 'next'): Promise<Sample> {
  const run = await app.start();
  const t0 = now();
  run.stop();
  const [loopAt, endAt] = await Promise.all([
    run.loopOver().then(now),
    (end === 'settled' ? run.settled.catch(() => {}) : run.next()).then(now),
  ]);
  const [loopMs, endMs] = [msSince(t0, loopAt), msSince(t0, endAt)];
  await run.ended; // `sh` has exited: what is left of its tree now are orphans
  const survivors = alive(run.pids).length;
  await reap(run.pids);
  return { loopMs, endMs, survivors };
}

/** Two rows for one framework: loop stopped, and the end (`endMetric`), fullstop against the plain app, in pairs. */
async function rows(ctx: SuiteContext, id: string, framework: string, make: (side: Side) => Promise<App>,
  end: 'settled' | 'next', endMetric: string): Promise<BenchResult[]> {
  const [fullstop, plain] = [await make('fullstop'), await make('plain')];
  try {
    const { samples: s, voided } = await samplePairs(id, { pairs: ctx.quick ? 3 : 15, warmup: 2 }, {
      fullstop: () => sample(fullstop, end),
      plain: () => sample(plain, end),
    }, ctx);
    assertNothingLive(fullstop.registry!, id);
    const sum = (xs: Sample[]) => xs.reduce((n, x) => n + x.survivors, 0);
    const extra = {
      framework, survivors: { fullstop: sum(s.fullstop), [BASELINE]: sum(s.plain) }, pool: fullstop.pool!.stats(), voided,
    };
    const series = (k: keyof Sample, xs: Sample[]) => xs.map((x) => x[k]);
    return [
      compare({ id, metric: `${framework}: stop → tool loop over`, unit: 'ms', extra }, series('loopMs', s.fullstop), [BASELINE, series('loopMs', s.plain)]),
      compare({ id: `${id}-${end}`, metric: `${framework}: ${endMetric}`, unit: 'ms' }, series('endMs', s.fullstop), [BASELINE, series('endMs', s.plain)]),
    ];
  } finally {
    await fullstop.close();
    await plain.close();
  }
}

export const suite = suiteOf({
  'I-ai I-ai-settled': (ctx) => rows(ctx, 'I-ai', 'AI SDK 6 generateText', aiApp, 'settled', 'stop → generateText settled'),
  'I-mcp I-mcp-next': (ctx) => rows(ctx, 'I-mcp', 'MCP SDK 1.32 (client cancel)', mcpApp, 'next', 'stop → next call answered'),
  'I-langgraph I-langgraph-settled': (ctx) => rows(ctx, 'I-langgraph', 'LangGraph 1.7 ReAct agent', langgraphApp, 'settled', 'stop → invoke settled'),
  'I-agents I-agents-settled': (ctx) => rows(ctx, 'I-agents', 'OpenAI Agents 0.20 run', agentsApp, 'settled', 'stop → run settled'),
});
