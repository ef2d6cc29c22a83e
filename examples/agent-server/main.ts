/**
 * `npm run serve -- [--port 3000] [--host 127.0.0.1] [--redis URL [--fleet-prefix P]] [--node-id ID] [--data DIR] [--grace MS]`:
 * the agent server. Prints the page's URL on its first line. With `--redis` it joins the fleet
 * (a stop sent to any instance reaches the turn wherever it runs); without, it runs alone.
 * `--data` holds its ledger (default: a fresh folder under the OS temp dir, printed).
 * `OPENAI_BASE_URL` (with `OPENAI_API_KEY`, `MODEL`) switches from the scripted model to a real
 * OpenAI-compatible endpoint.
 *
 * SIGTERM or SIGINT: running turns are stopped (history written and flushed), their processes
 * killed, the pool and the ledger closed; exit code 0.
 */
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Ledger, TurnPool, TurnRegistry, TurnRunner } from '../../src/index.js';
import { Fleet } from '../../src/fleet/index.js';
import { ScriptedModel, type Model } from './model.js';
import { openAIModelFromEnv } from './openai-model.js';
import { AgentServer } from './server.js';

interface Options { port: number; host: string; redis?: string; prefix?: string; nodeId: string; data?: string; grace: number }

function parse(): Options {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '3000' },
      host: { type: 'string', default: '127.0.0.1' },
      redis: { type: 'string' },
      'fleet-prefix': { type: 'string' },
      'node-id': { type: 'string' },
      data: { type: 'string' },
      grace: { type: 'string', default: '100' },
    },
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`--port: expected 0-65535, got ${values.port}`);
  const grace = Number(values.grace);
  if (!Number.isFinite(grace) || grace < 0) throw new RangeError(`--grace: expected milliseconds >= 0, got ${values.grace}`);
  const nodeId = values['node-id'] ?? `${hostname()}:${process.pid}`;
  if (!/^[\w.:-]{1,64}$/.test(nodeId)) throw new RangeError(`--node-id: expected 1-64 letters, digits, '-', '_', '.' or ':', got ${JSON.stringify(nodeId)}`);
  if (values.redis !== undefined && !/^rediss?:\/\//.test(values.redis)) throw new RangeError(`--redis: expected a redis:// or rediss:// URL, got ${JSON.stringify(values.redis)}`);
  const prefix = values['fleet-prefix'];
  if (prefix !== undefined && values.redis === undefined) throw new RangeError('--fleet-prefix: only with --redis');
  if (prefix !== undefined && !/^[\w.:-]{1,64}$/.test(prefix)) throw new RangeError(`--fleet-prefix: expected 1-64 letters, digits, '-', '_', '.' or ':', got ${JSON.stringify(prefix)}`);
  return { port, host: values.host!, redis: values.redis, prefix, nodeId, data: values.data, grace };
}

/** public/ next to the source file; from dist/ (tsc does not copy it) the same folder in the sources. */
function publicDir(): string {
  const beside = fileURLToPath(new URL('./public/', import.meta.url));
  return existsSync(join(beside, 'index.html')) ? beside : fileURLToPath(new URL('../../../examples/agent-server/public/', import.meta.url));
}

let options: Options;
try {
  options = parse();
} catch (error) {
  console.error(`agent-server: ${(error as Error).message}\nusage: npm run serve -- [--port 3000] [--host 127.0.0.1] [--redis redis://127.0.0.1:6379 [--fleet-prefix P]] [--node-id ID] [--data DIR] [--grace MS]`);
  process.exit(2);
}

const dataDir = options.data ?? mkdtempSync(join(tmpdir(), 'fullstop-agent-server-'));
mkdirSync(dataDir, { recursive: true });
const ledger = await Ledger.open(join(dataDir, 'history.jsonl'));
const registry = new TurnRegistry();
const pool = new TurnPool({ filename: new URL('./crunch-task.js', import.meta.url).href, minThreads: 1, maxThreads: 2 });
const runner = new TurnRunner({ registry, pool, ledger, graceMs: options.grace });
const model: Model = process.env.OPENAI_BASE_URL ? await openAIModelFromEnv() : new ScriptedModel();
const fleet = options.redis === undefined ? undefined : await joinFleet(options.redis, options.nodeId, options.prefix, runner);
const server = new AgentServer({ runner, pool, ledger, model, nodeId: options.nodeId, publicDir: publicDir(), fleet: fleet?.fleet });
const url = await server.listen(options.port, options.host);
// One write, so whoever reads the URL has the details too.
console.log(`fullstop agent server: ${url}\n  node ${options.nodeId}, model ${model.name}, ledger ${ledger.path}${fleet ? `, fleet ${options.redis}` : ', alone (no --redis)'}`);

let exiting = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (exiting) return;
    exiting = true;
    void shutdown(signal);
  });
}

async function shutdown(signal: string): Promise<void> {
  // First, before any await: shutdown() cancels the running turns synchronously (see there).
  const stopped = server.shutdown();
  console.log(`agent-server: ${signal}: stopping running turns`);
  // A shutdown that hangs must not leave the process up for ever.
  setTimeout(() => { console.error('agent-server: shutdown took over 10 s; exiting'); process.exit(1); }, 10_000).unref();
  let code = 0;
  try {
    await stopped;
    await fleet?.close();
    await pool.destroy();
    await ledger.close();
    console.log(`agent-server: stopped cleanly; registry ${JSON.stringify(registry.stats())}`);
  } catch (error) {
    console.error('agent-server: shutdown failed:', error);
    code = 1;
  }
  process.exit(code);
}

/**
 * Joins the fleet over Redis. The server owns the node-redis client (its URL, its reconnects) and
 * hands it to the fleet, which duplicates it once to subscribe. `redis` is an optional peer
 * dependency, so it is imported only here.
 */
async function joinFleet(url: string, nodeId: string, prefix: string | undefined, runner: TurnRunner): Promise<{ fleet: Fleet; close(): Promise<void> }> {
  const { createClient } = await import('redis');
  const redis = createClient({ url });
  // Without a listener node-redis would throw its connection errors; the fleet reports Redis
  // being away through its answers (`relay_unavailable`) and keeps reconnecting.
  let reported = false;
  redis.on('error', (error: Error) => {
    if (!reported) console.error(`agent-server: redis ${url}: ${error.message} (retrying)`);
    reported = true;
  });
  redis.on('ready', () => { reported = false; });
  const fleet = await Fleet.start({ redis, runner, nodeId, ...(prefix === undefined ? {} : { prefix }) });
  return {
    fleet,
    async close() {
      await fleet.close();
      redis.destroy();
    },
  };
}
