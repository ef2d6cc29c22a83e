/**
 * The setup shared by the runner tests: one registry and pool for the file, a fresh ledger
 * directory and runner per test, and after each test the registry and pool must hold nothing.
 */
import { afterAll, afterEach, beforeEach, expect, vi } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, TurnPool, TurnRegistry, TurnRunner, type LedgerEntry } from '../../dist/src/index.js';

export interface RunnerScene {
  readonly registry: TurnRegistry;
  readonly pool: TurnPool;
  /** This test's temporary directory (holds `history.jsonl`). */
  dir: string;
  ledger: Ledger;
  /** A runner on `ledger` with the scene's grace (100 ms unless given). */
  runner: TurnRunner;
  /** The ledger's file as it is on disk, one entry a line. */
  onDisk(): LedgerEntry[];
}

export interface RunnerSceneOptions {
  /** The pool's task module. @default test/fixtures/runner/tasks.mjs */
  tasks?: URL;
  /** The runner's grace. @default 100 */
  graceMs?: number;
  /** The pool's most threads. @default 2 */
  maxThreads?: number;
}

/** Registers the hooks; read `dir`, `ledger` and `runner` inside a test (they are fresh per test). */
export function runnerScene(tmpPrefix: string, options: RunnerSceneOptions = {}): RunnerScene {
  const tasks = (options.tasks ?? new URL('../fixtures/runner/tasks.mjs', import.meta.url)).href;
  const registry = new TurnRegistry();
  // The pool's own grace is short on purpose: a runner's turn must never be cut by it.
  const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: options.maxThreads ?? 2, graceMs: 50 });
  const scene = {
    registry,
    pool,
    onDisk: () => readFileSync(scene.ledger.path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as LedgerEntry),
  } as RunnerScene;

  beforeEach(async () => {
    scene.dir = mkdtempSync(join(tmpdir(), tmpPrefix));
    scene.ledger = await Ledger.open(join(scene.dir, 'history.jsonl'));
    scene.runner = new TurnRunner({ registry, ledger: scene.ledger, graceMs: options.graceMs ?? 100 });
  });

  afterEach(async () => {
    vi.restoreAllMocks();
    await scene.ledger.close().catch(() => {});
    rmSync(scene.dir, { recursive: true, force: true });
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    expect(pool.stats()).toMatchObject({ running: 0, queued: 0 });
  });

  afterAll(() => pool.destroy());
  return scene;
}

/**
 * A turn of `runner` whose one tool call waits for the stop; resolves once the call is inside,
 * with the run wrapped (an async function returning the run's promise would wait for it).
 */
export async function turnInATool(runner: TurnRunner, sessionId: string, options?: Parameters<TurnRunner['run']>[2]) {
  let inside!: () => void;
  const entered = new Promise<void>((r) => { inside = r; });
  const outcome = runner.run(sessionId, (turn) => turn.tool('build', {}, async (token) => {
    inside();
    await new Promise((r) => token.signal.addEventListener('abort', r));
    throw token.signal.reason;
  }), options);
  await entered;
  return { outcome };
}
