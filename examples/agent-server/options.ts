/**
 * The agent server's command line, parsed and checked in one place. Each bad flag is a
 * `RangeError` naming the flag and the value, which main.ts prints with the usage and exit code 2.
 */
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { clusterRootNodes, type ClusterRootNode } from '../../src/fleet/index.js';

/** The usage line main.ts prints under a refused flag. */
export const USAGE = 'usage: npm run serve -- [--port 3000] [--host 127.0.0.1] [--allowed-hosts NAME[:PORT],...] [--token TOKEN]\n' +
  '  [--redis redis://127.0.0.1:6379 | --redis-cluster HOST:PORT,HOST:PORT,...] [--fleet-prefix P] [--node-id ID]\n' +
  '  [--postgres postgres://HOST/DB [--pg-schema S]] [--data DIR] [--grace MS] [--max-streams N]';

/** The environment variable read for the bearer token when `--token` is not given. */
export const TOKEN_ENV = 'AGENT_SERVER_TOKEN';

/** The server's settings, as the flags give them. */
export interface ServerOptions {
  port: number;
  host: string;
  /** `Host` names allowed besides the bound address and the loopback names (see guard.ts). */
  allowedHosts: string[];
  /** The bearer token every API request must carry; `undefined`: none (bind to loopback). */
  token?: string;
  /** `--redis`: one Redis server's URL. */
  redis?: string;
  /** `--redis-cluster`: the cluster's root nodes, for node-redis `createCluster({ rootNodes })`. */
  redisCluster?: ClusterRootNode[];
  prefix?: string;
  /**
   * `--postgres`: history in PostgreSQL (`PgLedger`) instead of a file, shared by every instance;
   * a node-postgres connection string. Needs `--redis` or `--redis-cluster` (the fleet); every
   * instance's event streams read the history, so any instance can serve any request (no sticky sessions).
   */
  postgres?: string;
  /** `--pg-schema`: the PostgreSQL schema of the history (PgLedger's default when absent). */
  pgSchema?: string;
  nodeId: string;
  data?: string;
  grace: number;
  /** `--max-streams`: event streams open at once; `undefined`: the server's default. */
  maxStreams?: number;
}

const ID = /^[\w.:-]{1,64}$/;
/** A `Host` header value: a DNS name, an IPv4 address or a bracketed IPv6 one, maybe with a port. */
const HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;
/** A token: 16-512 characters of the RFC 6750 `b64token` set. */
const TOKEN = /^[A-Za-z0-9\-._~+/]{16,512}=*$/;

/** Parses `argv` (without node and the script) and `env`; throws `RangeError` naming the bad flag. */
export function parseServerOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ServerOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      port: { type: 'string', default: '3000' },
      host: { type: 'string', default: '127.0.0.1' },
      'allowed-hosts': { type: 'string' },
      token: { type: 'string' },
      redis: { type: 'string' },
      'redis-cluster': { type: 'string' },
      'fleet-prefix': { type: 'string' },
      'node-id': { type: 'string' },
      postgres: { type: 'string' },
      'pg-schema': { type: 'string' },
      data: { type: 'string' },
      grace: { type: 'string', default: '100' },
      'max-streams': { type: 'string' },
    },
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`--port: expected 0-65535, got ${values.port}`);
  const grace = Number(values.grace);
  if (!Number.isFinite(grace) || grace < 0) throw new RangeError(`--grace: expected milliseconds >= 0, got ${values.grace}`);
  const nodeId = values['node-id'] ?? `${hostname()}:${process.pid}`;
  if (!ID.test(nodeId)) throw new RangeError(`--node-id: expected 1-64 letters, digits, '-', '_', '.' or ':', got ${JSON.stringify(nodeId)}`);
  const allowedHosts = list(values['allowed-hosts']);
  for (const host of allowedHosts) {
    if (!HOST.test(host)) throw new RangeError(`--allowed-hosts: expected host names, each NAME or NAME:PORT, got ${JSON.stringify(host)}`);
  }
  const token = values.token ?? (env[TOKEN_ENV] === '' ? undefined : env[TOKEN_ENV]);
  if (token !== undefined && !TOKEN.test(token)) {
    throw new RangeError(`--token (or ${TOKEN_ENV}): expected 16-512 characters of A-Z a-z 0-9 - . _ ~ + /, got ${token.length} characters`);
  }
  const maxStreams = values['max-streams'] === undefined ? undefined : Number(values['max-streams']);
  if (maxStreams !== undefined && (!Number.isSafeInteger(maxStreams) || maxStreams < 1)) {
    throw new RangeError(`--max-streams: expected a positive integer, got ${values['max-streams']}`);
  }
  const redis = redisOptions(values);
  return { port, host: values.host!, allowedHosts, token, ...redis, ...postgresOptions(values, redis), nodeId, data: values.data, grace, maxStreams };
}

/** `--postgres` (which needs a fleet: without one, history shared and events not are no use) and `--pg-schema`. */
function postgresOptions(values: { postgres?: string; 'pg-schema'?: string; data?: string }, redis: Pick<ServerOptions, 'redis' | 'redisCluster'>): Pick<ServerOptions, 'postgres' | 'pgSchema'> {
  const { postgres, 'pg-schema': pgSchema } = values;
  if (pgSchema !== undefined && postgres === undefined) throw new RangeError('--pg-schema: only with --postgres');
  if (postgres === undefined) return { postgres: undefined, pgSchema: undefined };
  if (!/^postgres(?:ql)?:\/\/\S+$/.test(postgres)) throw new RangeError(`--postgres: expected a postgres:// or postgresql:// URL, got ${JSON.stringify(redact(postgres))}`);
  if (redis.redis === undefined && redis.redisCluster === undefined) {
    throw new RangeError('--postgres: needs --redis or --redis-cluster (the fleet carries stops and answers between instances)');
  }
  if (values.data !== undefined) throw new RangeError('--data: not with --postgres (the history is in PostgreSQL)');
  if (pgSchema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(pgSchema)) {
    throw new RangeError(`--pg-schema: expected 1-63 of a-z, 0-9, '_' (not starting with a digit), got ${JSON.stringify(pgSchema)}`);
  }
  return { postgres, pgSchema };
}

/** A connection string without its password, for messages. */
export function redact(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*):[^@/]*@/i, '$1:***@');
}

/** `--redis` / `--redis-cluster` (one or the other) and `--fleet-prefix`. */
function redisOptions(values: { redis?: string; 'redis-cluster'?: string; 'fleet-prefix'?: string }): Pick<ServerOptions, 'redis' | 'redisCluster' | 'prefix'> {
  const { redis, 'fleet-prefix': prefix } = values;
  if (redis !== undefined && values['redis-cluster'] !== undefined) throw new RangeError('--redis-cluster: give --redis or --redis-cluster, not both');
  if (redis !== undefined && !/^rediss?:\/\/\S+$/.test(redis)) throw new RangeError(`--redis: expected a redis:// or rediss:// URL, got ${JSON.stringify(redis)}`);
  const redisCluster = values['redis-cluster'] === undefined ? undefined : clusterRootNodes(values['redis-cluster'], '--redis-cluster');
  if (prefix !== undefined && redis === undefined && redisCluster === undefined) throw new RangeError('--fleet-prefix: only with --redis or --redis-cluster');
  if (prefix !== undefined && !ID.test(prefix)) throw new RangeError(`--fleet-prefix: expected 1-64 letters, digits, '-', '_', '.' or ':', got ${JSON.stringify(prefix)}`);
  return { redis, redisCluster, prefix };
}

/** A comma-separated flag as its non-empty items. */
function list(value: string | undefined): string[] {
  return value === undefined ? [] : value.split(',').map((s) => s.trim()).filter((s) => s !== '');
}
