/**
 * The agent server's flags (examples/agent-server/options.ts): what each parses to, and the
 * RangeError naming the flag for each bad value (main.ts prints it and exits 2).
 */
import { describe, expect, it } from 'vitest';
import { parseServerOptions } from '../dist/examples/agent-server/options.js';

describe('agent server flags', () => {
  it('defaults: port 3000 on 127.0.0.1, alone, no token, no extra hosts', () => {
    expect(parseServerOptions([], {})).toMatchObject({
      port: 3000, host: '127.0.0.1', allowedHosts: [], token: undefined, redis: undefined, redisCluster: undefined, grace: 100,
    });
  });

  it("--redis-cluster host:port,... becomes createCluster's root nodes", () => {
    const options = parseServerOptions(['--redis-cluster', '127.0.0.1:7000, 127.0.0.1:7001,[::1]:7002', '--fleet-prefix', 'p1'], {});
    expect(options.redisCluster).toEqual([
      { socket: { host: '127.0.0.1', port: 7000 } }, { socket: { host: '127.0.0.1', port: 7001 } }, { socket: { host: '::1', port: 7002 } },
    ]);
    expect(options.redis).toBeUndefined();
    expect(options.prefix).toBe('p1');
    expect(parseServerOptions(['--redis', 'redis://127.0.0.1:6379'], {})).toMatchObject({ redis: 'redis://127.0.0.1:6379', redisCluster: undefined });
  });

  it('takes the token from --token, else from AGENT_SERVER_TOKEN', () => {
    const token = 'abcdefghijklmnop-1234';
    expect(parseServerOptions(['--token', token], { AGENT_SERVER_TOKEN: 'ignored-because-flag-wins' }).token).toBe(token);
    expect(parseServerOptions([], { AGENT_SERVER_TOKEN: token }).token).toBe(token);
    expect(parseServerOptions([], { AGENT_SERVER_TOKEN: '' }).token).toBeUndefined();
  });

  it('--allowed-hosts is a comma-separated list of names, each with an optional port', () => {
    expect(parseServerOptions(['--allowed-hosts', 'agent.example,Box.local:8080,[fe80::1]:3000'], {}).allowedHosts)
      .toEqual(['agent.example', 'Box.local:8080', '[fe80::1]:3000']);
  });

  const refused: [string, string[], NodeJS.ProcessEnv, RegExp][] = [
    ['--redis and --redis-cluster together', ['--redis', 'redis://a:1', '--redis-cluster', 'a:1'], {}, /^--redis-cluster: give --redis or --redis-cluster, not both/],
    ['a cluster node without a port', ['--redis-cluster', '127.0.0.1:7000,127.0.0.1'], {}, /^--redis-cluster: expected host:port, got "127\.0\.0\.1"/],
    ['a cluster node given as a URL', ['--redis-cluster', 'redis://127.0.0.1:7000'], {}, /^--redis-cluster: expected host:port/],
    ['a cluster port out of range', ['--redis-cluster', 'h:70000'], {}, /^--redis-cluster: expected host:port, got "h:70000"/],
    ['an empty cluster list', ['--redis-cluster', ' , '], {}, /^--redis-cluster: expected one or more host:port/],
    ['--fleet-prefix without Redis', ['--fleet-prefix', 'p'], {}, /^--fleet-prefix: only with --redis or --redis-cluster/],
    ['a --redis that is not a URL', ['--redis', '127.0.0.1:6379'], {}, /^--redis: expected a redis:\/\/ or rediss:\/\/ URL/],
    ['a short token', ['--token', 'short'], {}, /^--token \(or AGENT_SERVER_TOKEN\): expected 16-512 characters/],
    ['a token with spaces from the environment', [], { AGENT_SERVER_TOKEN: 'has spaces in it, sixteen+' }, /^--token \(or AGENT_SERVER_TOKEN\): expected 16-512 characters/],
    ['a host with a path', ['--allowed-hosts', 'agent.example/x'], {}, /^--allowed-hosts: expected host names, each NAME or NAME:PORT, got "agent\.example\/x"/],
    ['a bad port', ['--port', '70000'], {}, /^--port: expected 0-65535, got 70000/],
    ['--postgres without a fleet', ['--postgres', 'postgres://127.0.0.1/test'], {}, /^--postgres: needs --redis or --redis-cluster/],
    ['a --postgres that is not a URL', ['--redis', 'redis://a:1', '--postgres', '127.0.0.1:5432'], {}, /^--postgres: expected a postgres:\/\/ or postgresql:\/\/ URL/],
    ['--pg-schema without --postgres', ['--pg-schema', 'history'], {}, /^--pg-schema: only with --postgres/],
    ['a --pg-schema that is no plain name', ['--redis', 'redis://a:1', '--postgres', 'postgres://h/db', '--pg-schema', 'a"b'], {}, /^--pg-schema: expected 1-63 of a-z/],
    ['--data with --postgres', ['--redis', 'redis://a:1', '--postgres', 'postgres://h/db', '--data', '/tmp/x'], {}, /^--data: not with --postgres/],
  ];
  for (const [what, argv, env, message] of refused) {
    it(`refuses ${what} with a RangeError naming the flag`, () => {
      expect(() => parseServerOptions(argv, env)).toThrow(RangeError);
      expect(() => parseServerOptions(argv, env)).toThrow(message);
    });
  }

  it('--postgres (with a fleet) keeps the history in PostgreSQL, in --pg-schema when given', () => {
    expect(parseServerOptions(['--redis-cluster', '127.0.0.1:7000', '--postgres', 'postgresql://u@db.internal:5432/agents', '--pg-schema', 'agent_history'], {}))
      .toMatchObject({ postgres: 'postgresql://u@db.internal:5432/agents', pgSchema: 'agent_history', data: undefined });
    expect(parseServerOptions([], {})).toMatchObject({ postgres: undefined, pgSchema: undefined });
  });

  it('does not print a password of --postgres in its refusal', () => {
    expect(() => parseServerOptions(['--redis', 'redis://a:1', '--postgres', 'postgres://me:s3cret@/db with space'], {})).toThrow(/"postgres:\/\/me:\*\*\*@\/db with space"/);
    expect(() => parseServerOptions(['--redis', 'redis://a:1', '--postgres', 'postgres://me:s3cret@/db with space'], {})).not.toThrow(/s3cret/);
  });

  it('does not print the token in its refusal', () => {
    expect(() => parseServerOptions(['--token', 'secret value with spaces!'], {})).toThrow(/got 25 characters$/);
  });
});
