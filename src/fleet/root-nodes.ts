/**
 * `host:port,host:port,...` (a command-line flag, an environment variable) as the `rootNodes` of
 * node-redis's `createCluster()`. The fleet never creates a client itself: the caller does, with
 * these root nodes and its own options.
 */

/** One root node of `createCluster({ rootNodes })`. */
export interface ClusterRootNode { socket: { host: string; port: number } }

/**
 * Parse a comma-separated list of cluster nodes. Throws a RangeError naming `name` for an empty
 * list or a node that is not `host:port` (an IPv6 host in brackets: `[::1]:7000`).
 *
 * @example
 * const redis = createCluster({ rootNodes: clusterRootNodes(process.env.REDIS_CLUSTER!, 'REDIS_CLUSTER') });
 */
export function clusterRootNodes(spec: string, name = 'spec'): ClusterRootNode[] {
  if (typeof spec !== 'string') throw new TypeError(`${name}: expected a string of host:port,... , got ${typeof spec}`);
  const nodes = spec.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (nodes.length === 0) throw new RangeError(`${name}: expected one or more host:port, got ${JSON.stringify(spec)}`);
  return nodes.map((node) => {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+)):(\d{1,5})$/.exec(node);
    const port = m === null ? NaN : Number(m[3]);
    if (m === null || port < 1 || port > 65535) throw new RangeError(`${name}: expected host:port, got ${JSON.stringify(node)}`);
    return { socket: { host: m[1] ?? m[2]!, port } };
  });
}
