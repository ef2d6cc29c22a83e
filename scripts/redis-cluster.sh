#!/usr/bin/env bash
# A local Redis Cluster for fullstop/fleet's cluster specs and bench: six redis-server processes
# (three masters, three replicas), no persistence, cluster-node-timeout 1000 ms.
#   scripts/redis-cluster.sh start   # ports REDIS_CLUSTER_PORT..+5 (default 7100-7105); idempotent
#   scripts/redis-cluster.sh stop    # SIGTERM to the six servers, temp dir removed
#   scripts/redis-cluster.sh status  # exit 0 when the cluster answers cluster_state:ok
#   scripts/redis-cluster.sh restart-node PORT  # start a killed node again (it rejoins, as a replica
#                                    # when its replica was promoted) and wait for every replica to sync
# The state (pid files, nodes.conf, logs) lives in REDIS_CLUSTER_DIR (default /tmp/fullstop-redis-cluster).
set -euo pipefail
BASE=${REDIS_CLUSTER_PORT:-7100}
DIR=${REDIS_CLUSTER_DIR:-/tmp/fullstop-redis-cluster}
PORTS=$(seq "$BASE" $((BASE + 5)))

ok() { redis-cli -p "$BASE" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }

start_node() {
  local port=$1
  mkdir -p "$DIR/$port"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --dir "$DIR/$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
    --cluster-require-full-coverage no \
    --save "" --appendonly no --pidfile "$DIR/$port/redis.pid" --logfile "$DIR/$port/redis.log"
}

wait_ping() {
  for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "redis-cluster: port $1 does not answer" >&2; return 1
}

# True once the cluster is ok (as node ${1:-BASE} sees it) and all three replicas have their link to
# their master up; gives up after 30 s.
replicas_synced() {
  local synced p
  for _ in $(seq 600); do
    synced=0
    for p in $PORTS; do
      redis-cli -p "$p" info replication | grep -q 'master_link_status:up' && synced=$((synced + 1))
    done
    redis-cli -p "${1:-$BASE}" cluster info | grep -q '^cluster_state:ok' && [ "$synced" = 3 ] && return 0
    sleep 0.05
  done
  return 1
}

case "${1:-}" in
  start)
    command -v redis-server >/dev/null || { echo 'redis-cluster: no redis-server on PATH' >&2; exit 1; }
    if ok; then echo "redis-cluster: already up on $BASE-$((BASE + 5))"; exit 0; fi
    "$0" stop >/dev/null 2>&1 || true
    for p in $PORTS; do start_node "$p"; done
    for p in $PORTS; do wait_ping "$p"; done
    # shellcheck disable=SC2046
    redis-cli --cluster create $(for p in $PORTS; do printf '127.0.0.1:%s ' "$p"; done) \
      --cluster-replicas 1 --cluster-yes >"$DIR/create.log"
    for _ in $(seq 200); do ok && break; sleep 0.05; done
    ok || { echo 'redis-cluster: cluster_state is not ok' >&2; exit 1; }
    # Every replica synced with its master (attached is not enough: a replica that has not synced
    # yet is not promoted), so a failover test has one to promote.
    replicas_synced || { echo 'redis-cluster: the replicas did not sync' >&2; exit 1; }
    echo "redis-cluster: up on 127.0.0.1:$BASE-$((BASE + 5))"
    ;;
  stop)
    for p in $PORTS; do
      if [ -f "$DIR/$p/redis.pid" ]; then kill "$(cat "$DIR/$p/redis.pid")" 2>/dev/null || true; fi
    done
    for p in $PORTS; do
      for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 || break; sleep 0.05; done
    done
    rm -rf "$DIR"
    echo 'redis-cluster: stopped'
    ;;
  status) ok ;;
  restart-node)
    port=${2:?port}
    start_node "$port"
    wait_ping "$port"
    # Back in: the cluster is ok as the restarted node sees it, and every replica (the restarted
    # one included) has its link to its master up, so the next failover has a replica to promote.
    replicas_synced "$port" || { echo 'redis-cluster: the restarted node did not rejoin' >&2; exit 1; }
    ;;
  *) echo "usage: $0 start|stop|status|restart-node PORT" >&2; exit 2 ;;
esac
