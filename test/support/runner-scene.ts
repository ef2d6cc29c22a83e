/**
 * The setup shared by the runner fault tests: one registry and pool for the file, a fresh ledger
 * directory and runner per test, and after each test the registry and pool must hold nothing.
 */
import { afterAll, afterEach, beforeEach, expect, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, TurnPool, TurnRegistry, TurnRunner } from '../../dist/src/index.js';

export interface RunnerScene {
  readonly registry: TurnRegistry;
  readonly pool: TurnPool;
  /** This test's temporary directory (holds `history.jsonl`). */
  dir: string;
  ledger: Ledger;
  /** A runner on `ledger` with a 100 ms grace. */
  runner: TurnRunner;
}

/** Registers the hooks; read `dir`, `ledger` and `runner` inside a test (they are fresh per test). */
export function runnerScene(tmpPrefix: string): RunnerScene {
  const tasks = new URL('../fixtures/runner/tasks.mjs', import.meta.url).href;
  const registry = new TurnRegistry();
  // The pool's own grace is short on purpose: a runner's turn must never be cut by it.
  const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 2, graceMs: 50 });
  const scene = { registry, pool } as RunnerScene;

  beforeEach(async () => {
    scene.dir = mkdtempSync(join(tmpdir(), tmpPrefix));
    scene.ledger = await Ledger.open(join(scene.dir, 'history.jsonl'));
    scene.runner = new TurnRunner({ registry, pool, ledger: scene.ledger, graceMs: 100 });
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
