#!/usr/bin/env bash
# CI reliability checks (called by tools/ci-extra.sh; about 3 minutes on 2 cores):
#  1. libFuzzer targets for the safetensors, IDX and CIFAR-10 readers, the
#     JPEG/PNG decoder (tools/fuzz_image.c) and tools/fuzz_data.c (the
#     readers plus the batch assembler), each for
#     FUZZ_SECONDS (default 20) from the committed seed corpus (tools/corpus/);
#     a crash, leak, sanitizer report or timeout fails CI and prints the input;
#  2. valgrind memcheck on a short training loop (2 virtual CPU devices,
#     checkpoints every step): no errors and no definite/indirect/possible
#     leaks beyond tools/valgrind.supp;
#  3. the soak check (tools/soak.lua): over 40,000 training steps after a
#     10,000-step warm-up, memory measured settled (collected, caches
#     emptied) grows by less than a few bytes per step: resident set, glibc's
#     heap, the Lua heap and live tensors;
#  4. the Lua-API fuzzer (tools/fuzz_api.lua) under the ASan+UBSan build
#     (${LUNET_ASAN_BUILD:-build-asan}, built or brought up to date here): its
#     corpus of past crashes (tools/corpus/api/) replayed, then random cases
#     for FUZZ_API_SECONDS (default 30) from a seed that changes daily
#     (FUZZ_API_SEED=S repeats a run); a crash, sanitizer report, hang,
#     broken invariant or raw Lua error fails CI and prints the reproducer.
# The specs (reliability, fault, badinput) run with the rest in make test /
# make test-asan. Uses ${LUNET_BUILD:-build}/liblunet.so (built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/install-deps.sh reliability
build=${LUNET_BUILD:-build}
[ -f "$build/liblunet.so" ] || make --no-print-directory BUILD="$build" -j2 all >/dev/null
export LUNET_LIB="$root/$build/liblunet.so"
export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;;"
export OMP_WAIT_POLICY=passive
unset LD_PRELOAD
work=$(mktemp -d)
trap 'rm -rf "$work"; rm -f /tmp/fuzz_idx_* /tmp/fuzz_cifar_* /tmp/fuzz_st_* /tmp/fuzz_data_* /tmp/fuzz_image_*' EXIT
secs=${FUZZ_SECONDS:-20}
start=$SECONDS

echo "== reliability: libFuzzer, ${secs}s per target"
fuzz() {   # fuzz NAME SEEDS SOURCES... : build, run from a copy of tools/corpus/{SEEDS}
  local name=$1 seeds=$2; shift 2
  clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Ic/include -Ic/core "$@" c/core/error.c c/core/dtype.c c/core/file.c -lz -lm -o "$work/fuzz_$name"
  mkdir -p "$work/corpus_$name"
  for d in $seeds; do cp tools/corpus/"$d"/* "$work/corpus_$name/"; done
  local rc=0
  (cd "$work" && timeout $((secs + 60)) "./fuzz_$name" -max_total_time="$secs" -max_len=8192 -timeout=10 \
     -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/crash_$name-" \
     "corpus_$name" >"$work/fuzz_$name.log" 2>&1) || rc=$?
  local execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz_$name.log" | grep -o '[0-9]*$' || echo '?')
  local cov=$(grep -o 'cov: [0-9]*' "$work/fuzz_$name.log" | tail -1 || true)
  echo "fuzz $name: $execs inputs in ${secs}s, $cov, corpus $(ls "$work/corpus_$name" | wc -l) files, exit $rc"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|==[0-9]+==|Test unit written' "$work/fuzz_$name.log" | head -40
    for f in "$work"/crash_"$name"-*; do [ -f "$f" ] && { echo "input $f:"; od -A d -t x1 "$f" | head -20; }; done
    return 1
  fi
}
fuzz safetensors safetensors tools/fuzz_safetensors.c c/core/safetensors.c
fuzz idx idx tools/fuzz_idx.c c/data/idx.c
fuzz cifar cifar tools/fuzz_cifar.c c/data/idx.c
# (the pixel limit lowered so that a small file promising a huge image cannot time out)
fuzz image image -DIMG_MAX_PIXELS='((int64_t)1<<22)' tools/fuzz_image.c c/data/image.c -ljpeg -lpng
# the data engineer's target: both readers and the batch assembler
[ -f tools/fuzz_data.c ] && fuzz data "idx cifar" tools/fuzz_data.c c/data/idx.c c/data/batch.c c/data/augment.c

echo "== reliability: valgrind on a short training loop"
vg_log="$work/valgrind.log"
rc=0
LUNET_CPU_DEVICES=2 timeout 300 valgrind --quiet --suppressions=tools/valgrind.supp --leak-check=full \
  --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
  --error-exitcode=99 --num-callers=30 --log-file="$vg_log" \
  luajit spec/support/fault_child.lua "$work/vg.ckpt" "$work/vg.out" 1 1 >"$work/vg.stdout" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || ! grep -q '^done' "$work/vg.stdout"; then
  echo "valgrind: exit $rc"; cat "$work/vg.stdout"; head -100 "$vg_log"; exit 1
fi
echo "valgrind: 12 training steps (2 virtual devices, a checkpoint each step), no errors, no leaks beyond tools/valgrind.supp"

echo "== reliability: soak"
timeout 300 luajit tools/soak.lua 40000 64 10000

echo "== reliability: Lua-API fuzzer under ASan+UBSan"
asan=${LUNET_ASAN_BUILD:-build-asan}
make --no-print-directory BUILD="$asan" CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
  EXTRA_LDFLAGS="-fsanitize=address,undefined" -j2 all >/dev/null
api_seed=${FUZZ_API_SEED:-$(( $(date -u +%s) / 86400 ))}
api() { LUNET_LIB="$root/$asan/liblunet.so" LUNET_ASAN=1 FUZZ_TMP="$work" luajit tools/fuzz_api.lua "$@"; }
api --replay --timeout 120
api --seconds "${FUZZ_API_SECONDS:-30}" --seed "$api_seed" --strict --timeout 120 --corpus "$work/api_found"

echo "== reliability: passed in $((SECONDS - start))s"
