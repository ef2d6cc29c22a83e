/**
 * The PostgreSQL of this machine (127.0.0.1:5432, user postgres, database test) for the
 * `fullstop/postgres` specs: each test gets schemas of its own and pools it opens through
 * `pools`; after the test every pool is ended and every schema dropped, and none may be left.
 */
import { afterEach, expect } from 'vitest';
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const PG = { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' } as const;

export interface PgScene {
  /** A new pool (to 5432, or to `port`: a proxy), ended after the test. */
  pool(port?: number, options?: pg.PoolConfig): pg.Pool;
  /** A fresh schema name, dropped after the test. */
  schema(): string;
  /** The schemas of this scene's prefix, made by this process, that exist now. */
  leftSchemas(): Promise<string[]>;
}

/** Registers the hooks; `prefix` names this file's schemas (letters and _). */
export function pgScene(prefix: string): PgScene {
  // This process's mark in every schema name: another suite run beside this one (CI's Node legs
  // share the server) has schemas of the same prefix that are not this run's to count or drop.
  const mine = process.pid.toString(36);
  const pools: pg.Pool[] = [];
  const schemas: string[] = [];
  const admin = () => new pg.Pool({ ...PG, max: 1 });
  const scene: PgScene = {
    pool(port = PG.port, options = {}) {
      const pool = new pg.Pool({ ...PG, port, ...options });
      // An idle client whose connection a test cut must not crash the process.
      pool.on('error', () => {});
      pools.push(pool);
      return pool;
    },
    schema() {
      const name = `t_${prefix}_${mine}_${randomBytes(5).toString('hex')}`;
      schemas.push(name);
      return name;
    },
    async leftSchemas() {
      const a = admin();
      try {
        const { rows } = await a.query('SELECT nspname FROM pg_namespace WHERE nspname LIKE $1', [`t\\_${prefix}\\_${mine}\\_%`]);
        return rows.map((r) => r.nspname as string);
      } finally {
        await a.end();
      }
    },
  };
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.end().catch(() => {})));
    const a = admin();
    try {
      for (const name of schemas.splice(0)) await a.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    } finally {
      await a.end();
    }
    expect(await scene.leftSchemas()).toEqual([]);
  });
  return scene;
}
