#!/usr/bin/env bash
# CI: every example in its short smoke mode (a few steps, small data).
set -euo pipefail
cd "$(dirname "$0")/.."
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;;"
run() { echo "== example: $*"; timeout 600 "$@" | tail -3; }
run luajit examples/fashion_mnist.lua --smoke
run luajit examples/seed_cnn.lua 2
LUNET_CPU_DEVICES=2 run luajit examples/seed_cnn.lua 2
run luajit examples/resnet.lua --smoke
if [ -f examples/data_parallel.lua ]; then LUNET_CPU_DEVICES=2 run luajit examples/data_parallel.lua --smoke; fi
echo "== examples: smoke runs passed"
