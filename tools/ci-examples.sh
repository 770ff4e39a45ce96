#!/usr/bin/env bash
# CI: every example in its short smoke mode (a few steps, small data), and the
# data-parallel benches for one step.
set -euo pipefail
cd "$(dirname "$0")/.."
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;;"
run() { echo "== example: $*"; timeout 600 "$@" | tail -3; }
run luajit examples/fashion_mnist.lua --smoke
run luajit examples/seed_cnn.lua 2
LUNET_CPU_DEVICES=2 run luajit examples/seed_cnn.lua 2
run luajit examples/resnet.lua --smoke
run luajit examples/finetune.lua --smoke                 # ImageFolder, .pth weights, checkpoint, grid, ONNX
run luajit examples/finetune.lua --smoke --freeze --trivialaugment --schedule cosine
run luajit examples/finetune.lua --smoke --freeze --arch mobilenet_v3_small   # its head is classifier[4]
if [ -f examples/data_parallel.lua ]; then
  LUNET_CPU_DEVICES=2 run luajit examples/data_parallel.lua --smoke
  LUNET_CPU_DEVICES=3 run luajit examples/data_parallel.lua --smoke --accumulate 2   # fit steps once per 2 batches
fi
run luajit examples/auto_parallel.lua --smoke --batch 16
if command -v mpirun >/dev/null; then   # DistributedDataParallel over 2 processes, then the same alone
  run mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LUA_PATH luajit examples/distributed.lua --smoke
  run luajit examples/distributed.lua --smoke
  # a pipeline whose stages are processes, then 2 pipelines x 2 stages, then alone (the same losses)
  run mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LUA_PATH luajit examples/distributed_pipeline.lua --smoke
  run mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LUA_PATH luajit examples/distributed_pipeline.lua --smoke --schedule zb
  run mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 -x LUA_PATH luajit examples/distributed_pipeline.lua --smoke --replicas 2
  run luajit examples/distributed_pipeline.lua --smoke
  run luajit bench/distributed_train.lua --steps 1 --groups 1 --models lenet5   # its figures are not checked here
fi
run luajit examples/pipeline.lua --smoke                 # 2 stages, each device under its memory limit
run luajit examples/pipeline.lua --smoke --devices 3 --schedule gpipe --memory 112
run luajit examples/pipeline.lua --smoke --schedule zb        # zero-bubble under the same limit
LUNET_CPU_DEVICES=2 run luajit examples/auto_parallel.lua --smoke --batch 16   # the planner's table, then fit
# the data-parallel and all-reduce benches run (one step each; their figures are not checked here)
run luajit bench/data_parallel.lua --steps 1 --groups 1 --rounds 1 --models lenet5
run luajit bench/comm.lua --runs 1 --min 1 --max 4
echo "== examples: smoke runs passed"
