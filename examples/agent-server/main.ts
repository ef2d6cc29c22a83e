/**
 * `npm run serve -- [flags]` (options.ts lists them): the agent server. Prints the page's URL on
 * its first line (with `#token=` when a token is set: the page reads it there). With `--redis` or
 * `--redis-cluster` it joins the fleet (a stop sent to any instance reaches the turn wherever it
 * runs); without, it runs alone. `--data` holds its ledger (default: a fresh folder under the OS
 * temp dir, printed); `--postgres` keeps it in PostgreSQL instead, shared by every instance: the
 * event streams read it (fullstop/http), so any instance serves any session's stream and no
 * sticky sessions are needed. `OPENAI_BASE_URL` (with `OPENAI_API_KEY`, `MODEL`) switches from the
 * scripted model to a real OpenAI-compatible endpoint.
 *
 * SIGTERM or SIGINT: running turns are stopped (history written and flushed), their processes
 * killed, the pool and the ledger closed; exit code 0.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TurnPool, TurnRegistry, TurnRunner } from '../../src/index.js';
import { Fleet } from '../../src/fleet/index.js';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { openHistory } from './history.js';
import { PROMPT_LOG_ENV, ScriptedModel } from './model.js';
import { openAIModelFromEnv } from './openai-model.js';
import { parseServerOptions, USAGE, type ServerOptions } from './options.js';
import { AgentServer } from './server.js';
import { startTelemetry } from './telemetry.js';

/** public/ next to the source file; from dist/ (tsc does not copy it) the same folder in the sources. */
function publicDir(): string {
  const beside = fileURLToPath(new URL('./public/', import.meta.url));
  return existsSync(join(beside, 'index.html')) ? beside : fileURLToPath(new URL('../../../examples/agent-server/public/', import.meta.url));
}

let options: ServerOptions;
try {
  options = parseServerOptions(process.argv.slice(2));
} catch (error) {
  console.error(`agent-server: ${(error as Error).message}\n${USAGE}`);
  process.exit(2);
}

const history = await openHistory(options);
const { ledger } = history;
const registry = new TurnRegistry();
const pool = new TurnPool({ filename: new URL('./crunch-task.js', import.meta.url).href, minThreads: 1, maxThreads: 2 });
const runner = new TurnRunner({ registry, pool, ledger, graceMs: options.grace });
const model: LanguageModelV3 = process.env.OPENAI_BASE_URL ? await openAIModelFromEnv() : new ScriptedModel({ promptLog: process.env[PROMPT_LOG_ENV] || undefined });
const telemetry = await startTelemetry(runner);
const fleet = await joinFleet(options, runner);
const server = new AgentServer({
  runner, pool, ledger, model, nodeId: options.nodeId, publicDir: publicDir(), fleet: fleet?.fleet,
  allowedHosts: options.allowedHosts, token: options.token, maxStreams: options.maxStreams,
});
const url = await server.listen(options.port, options.host);
// Before the URL goes out: whoever reads it may send SIGTERM at once, and a signal that came
// before its handler would end the process without its shutdown.
let exiting = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (exiting) return;
    exiting = true;
    void shutdown(signal);
  });
}
// One write, so whoever reads the URL has the details too.
console.log(`fullstop agent server: ${url}\n  node ${options.nodeId}, model ${model.provider}:${model.modelId}, ${history.description}, ${fleet?.name ?? 'alone (no --redis)'}` +
  `${telemetry === undefined ? '' : `, OpenTelemetry to ${telemetry.endpoint}`}` +
  `${options.token === undefined ? ', no token (loopback only: see docs/agent-server.md)' : ', bearer token required'}`);


async function shutdown(signal: string): Promise<void> {
  // runner.shutdown() (in server.shutdown) stops every running turn: reason cancel.shutdown.
  const stopped = server.shutdown();
  console.log(`agent-server: ${signal}: stopping running turns`);
  // A shutdown that hangs must not leave the process up for ever (the runner's deadline is 10 s).
  setTimeout(() => { console.error('agent-server: shutdown took over 15 s; exiting'); process.exit(1); }, 15_000).unref();
  let code = 0;
  try {
    await stopped;
    await fleet?.close();
    await pool.destroy();
    await history.close();
    // Last: the stops' spans and metrics are flushed to the collector.
    await telemetry?.close();
    console.log(`agent-server: stopped cleanly; registry ${JSON.stringify(registry.stats())}`);
  } catch (error) {
    console.error('agent-server: shutdown failed:', error);
    code = 1;
  }
  process.exit(code);
}

/**
 * Joins the fleet over Redis (`--redis`) or Redis Cluster (`--redis-cluster`); `undefined` for
 * neither. The server owns the node-redis client (its URL, its reconnects) and hands it to the
 * fleet, which duplicates it to subscribe. `redis` is an optional peer dependency, so it is
 * imported only here.
 */
async function joinFleet(options: ServerOptions, runner: TurnRunner): Promise<{ fleet: Fleet; name: string; close(): Promise<void> } | undefined> {
  if (options.redis === undefined && options.redisCluster === undefined) return undefined;
  const { createClient, createCluster } = await import('redis');
  const name = options.redis === undefined
    ? `fleet on cluster ${options.redisCluster!.map(({ socket }) => `${socket.host}:${socket.port}`).join(',')}`
    : `fleet ${options.redis}`;
  const redis = options.redis === undefined ? createCluster({ rootNodes: options.redisCluster! }) : createClient({ url: options.redis });
  // Without a listener node-redis would throw its connection errors; the fleet reports Redis
  // being away through its answers (`relay_unavailable`) and keeps reconnecting.
  let reported = false;
  redis.on('error', (error: Error) => {
    if (!reported) console.error(`agent-server: ${name}: ${error.message} (retrying)`);
    reported = true;
  });
  redis.on('ready', () => { reported = false; });
  const fleet = await Fleet.start({ redis, runner, nodeId: options.nodeId, prefix: options.prefix ?? 'fullstop' });
  return {
    fleet,
    name,
    async close() {
      await fleet.close();
      redis.destroy();
    },
  };
}
