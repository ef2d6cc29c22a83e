#!/usr/bin/env bash
# Installs the runtimes CI tests on besides the machine's Node (runtimes/: Node 22, 24, 26, Bun, Deno,
# pinned by runtimes/package-lock.json) and prints where each binary is. npm 11 runs no install
# scripts, and a fresh `npm ci` has been seen to leave @oven/bun-linux-x64/bin empty; the binary is
# then taken from the package's own tarball (npm's cache), so the version stays the lock file's.
set -euo pipefail
cd "$(dirname "$0")/../runtimes"
[ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error
bun=node_modules/@oven/bun-linux-x64/bin/bun
if [ ! -x "$bun" ]; then
  version=$(node -p "require('./node_modules/@oven/bun-linux-x64/package.json').version")
  tmp=$(mktemp -d)
  npm pack --silent --pack-destination "$tmp" "@oven/bun-linux-x64@$version" >/dev/null
  tar -xzf "$tmp"/oven-bun-linux-x64-*.tgz -C "$tmp" package/bin/bun
  mkdir -p "$(dirname "$bun")" && mv "$tmp/package/bin/bun" "$bun" && chmod +x "$bun"
  rm -rf "$tmp"
fi
for bin in node_modules/node-v22/bin/node node_modules/node-v24/bin/node node_modules/node-v26/bin/node "$bun" node_modules/@deno/linux-x64-glibc/deno; do
  [ -x "$bin" ] || { echo "install-runtimes: $bin is missing" >&2; exit 1; }
done
