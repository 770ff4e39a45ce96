#!/usr/bin/env bash
# gpu-check.sh OUTDIR -- everything lunet's CUDA backend must show on a GPU, in
# one command, from a copy of the work tree plus build/gpu-carry (made here by
# `make gpu-carry`: the built libraries, luajit, busted, the shared libraries a
# GPU machine lacks). Nothing is built there. Writes to OUTDIR (7 files, the
# device tool brings back 8 at most):
#   env.log          the machine: GPU, driver, CUDA, torch; lunet's view of it
#   specs-cuda.log   spec/cuda_*_spec.lua with LUNET_TEST_DEVICE=cuda:0 (NCCL's last)
#   specs-all.log    the whole suite with the GPU present (cuda:0 listed first)
#   bench.log        bench/gpu.lua and bench/gpu_torch.py side by side
#   bench-lunet.json, bench-torch.json   their figures
#   summary.json     pass/fail counts, phase times, the figures, exit status
# Exit status: 0 the CUDA specs passed; 1 some failed (or a phase broke);
# 2 no GPU here; 3 the carried folder is missing or does not match.
# Without a GPU it says so and exits 2 within seconds. GPU_CHECK_DRY=1 does
# everything but the GPU parts (checks the carry, unpacks it, runs the CUDA
# specs, which are then pending): how it is checked without a GPU
# (spec/cuda_gpucheck_spec.lua).
#
# THE DEVICE CALL (a session that has a GPU; about 15 minutes of device time
# in all, start-up included). First, here, in the checkout the device tool
# sends (the session's own: build/ is per checkout): `make -j2 && make
# gpu-carry` (build/gpu-carry, about 21 MiB; the tree and it travel in 64 MiB),
# then one call of the device tool:
#   run(command = "bash tools/gpu-check.sh $OUT",
#       carry   = ["build/gpu-carry"],
#       timeout_s = 540)
# The phases are bounded (CUDA specs 180 s: kernels 130, NCCL 50; whole suite 120 s, each bench
# 90 s) so it ends within about 8 minutes whatever hangs; then give_back.
# Read summary.json first, then specs-cuda.log: every kernel of c/cuda is
# compared with the CPU's there (spec/cuda_kernels_spec.lua), and none of
# c/cuda had run on a GPU when this was written.
set -uo pipefail
out=${1:?usage: tools/gpu-check.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 3
mkdir -p "$out" || exit 3
out=$(cd "$out" && pwd)
carry=${GPU_CARRY:-$root/build/gpu-carry}
dry=${GPU_CHECK_DRY:-0}
t0=$(date +%s)
declare -A phase_s
status=0

json_str() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t' '  '; }
summary() {   # summary.json from what is known so far; $1: the exit status
  local figures_l='null' figures_t='null' k
  [ -s "$out/bench-lunet.json" ] && figures_l=$(cat "$out/bench-lunet.json")
  [ -s "$out/bench-torch.json" ] && figures_t=$(cat "$out/bench-torch.json")
  {
    echo '{'
    echo "  \"gpu\": ${gpu_json:-false},"
    echo "  \"gpu_name\": \"$(json_str "${gpu_name:-}")\","
    echo "  \"reason\": \"$(json_str "${reason:-}")\","
    echo "  \"dry_run\": $([ "$dry" = 1 ] && echo true || echo false),"
    echo "  \"carry\": \"$(json_str "${carry_state:-}")\","
    echo "  \"specs_cuda\": {\"passed\": ${cuda_pass:-null}, \"failed\": ${cuda_fail:-null}, \"pending\": ${cuda_pend:-null}},"
    echo "  \"specs_nccl\": {\"passed\": ${nccl_pass:-null}, \"failed\": ${nccl_fail:-null}, \"pending\": ${nccl_pend:-null}},"
    echo "  \"specs_all\": {\"passed\": ${all_pass:-null}, \"failed\": ${all_fail:-null}},"
    echo "  \"phase_seconds\": {"
    local first=1
    for k in "${!phase_s[@]}"; do [ $first = 1 ] || echo ','; first=0; printf '    "%s": %s' "$k" "${phase_s[$k]}"; done
    echo; echo '  },'
    echo "  \"bench_lunet\": $figures_l,"
    echo "  \"bench_torch\": $figures_t,"
    echo "  \"seconds\": $(( $(date +%s) - t0 )),"
    echo "  \"exit_status\": $1"
    echo '}'
  } > "$out/summary.json"
}
finish() { summary "$1"; echo "gpu-check: exit $1 after $(( $(date +%s) - t0 )) s; figures and logs in $out"; exit "$1"; }
phase() { phase_s[$1]=$(( $(date +%s) - $2 )); }

# ---- 1. a GPU? (seconds; nothing else runs without one) -------------------------
if [ "$dry" != 1 ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    reason="no NVIDIA GPU here: nvidia-smi is not installed"
  elif ! gpu_name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1) || [ -z "$gpu_name" ]; then
    reason="no NVIDIA GPU here: nvidia-smi says: $gpu_name"
    gpu_name=""
  fi
  if [ -n "${reason:-}" ]; then
    echo "gpu-check: $reason" | tee "$out/env.log" >&2
    finish 2
  fi
  gpu_json=true
fi

# ---- 2. the carried folder ----------------------------------------------------------
for f in MANIFEST liblunet.so liblunet_cuda.so cdef.lua cdef_internal.lua luajit libs.tar.xz lua.tar.xz; do
  if [ ! -f "$carry/$f" ]; then
    carry_state="missing $carry/$f"
    echo "gpu-check: $carry/$f is missing: run 'make gpu-carry' where lunet builds and carry build/gpu-carry" >&2
    finish 3
  fi
done
if ! (cd "$carry" && tail -n +3 MANIFEST | sha256sum -c --quiet -) >/dev/null 2>&1; then
  carry_state="checksums differ from $carry/MANIFEST"
  echo "gpu-check: $carry does not match its MANIFEST (a partial copy?)" >&2
  finish 3
fi
made_from=$(sed -n '1s/^commit //p' "$carry/MANIFEST")
here=$(git rev-parse -q --verify HEAD 2>/dev/null) || here=unknown
carry_state="built from $made_from; tree at $here"
case "$made_from" in "$here"*) ;; *) echo "gpu-check: warning: the carry was built from $made_from, the tree is at $here" >&2;; esac

# ---- 3. unpack: libraries, luajit, busted; generated declarations beside ---------------
ts=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/lunet-gpu.XXXXXX") || finish 3
mkdir -p "$work/bin" "$work/gen/lunet"
tar -C "$work" -xJf "$carry/libs.tar.xz" && tar -C "$work" -xJf "$carry/lua.tar.xz" || { carry_state="unpack failed"; finish 3; }
cp "$carry/liblunet.so" "$carry/liblunet_cuda.so" "$work/lib/"
cp "$carry/cdef.lua" "$carry/cdef_internal.lua" "$work/gen/lunet/"
cp "$carry/luajit" "$work/bin/luajit" && chmod +x "$work/bin/luajit"
export PATH="$work/bin:$PATH"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LUNET_LIB="$work/lib/liblunet.so"
export LUA_PATH="$work/gen/?.lua;$root/lua/?.lua;$root/lua/?/init.lua;$root/spec/?.lua;$work/lua/share/?.lua;$work/lua/share/?/init.lua;;"
export LUA_CPATH="$work/lua/lib/?.so;;"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
phase unpack "$ts"
busted=("$work/bin/luajit" "$work/lua/busted" --no-auto-insulate --helper=spec/support/helper.lua -o spec/support/handler.lua)

# ---- 4. the machine, as the tools and lunet see it --------------------------------------
{
  echo "== gpu-check at $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) ($(uname -r)); carry: $carry_state"
  [ "$dry" = 1 ] && echo "== DRY RUN: no GPU parts"
  command -v nvidia-smi >/dev/null && nvidia-smi
  command -v nvcc >/dev/null && nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available() and torch.cuda.get_device_name(0))' 2>&1
  echo "== missing shared libraries (ldd):"
  for f in "$work"/lib/*.so*; do ldd "$f" 2>&1 | grep -i "not found" | sed "s|^|$(basename "$f"): |"; done
  echo "== lunet:"
  luajit -e "local l = require 'lunet'; print('devices', table.concat(l.devices(), ' '), 'cuda', l.cuda.device_count(), 'reason', l.cuda.reason())" 2>&1
} > "$out/env.log" 2>&1
reason=$(luajit -e "local l = require 'lunet'; io.write(l.cuda.reason() or '')" 2>&1)
if [ "$dry" != 1 ] && [ -n "$reason" ]; then
  echo "gpu-check: nvidia-smi sees a GPU but lunet does not: $reason (env.log)" >&2
  status=1
fi

# counts from busted's last line ("N passed, M failed, K skipped")
counts() { tail -n 5 "$1" | grep -Eo '[0-9]+ (passed|failed|skipped)' | awk -v w="$2" '$2 == w { print $1 }' | tail -1; }

# ---- 5. the CUDA specs on cuda:0 ------------------------------------------------------------
ts=$(date +%s)
if [ "$dry" = 1 ]; then dev_env=(); else dev_env=(LUNET_TEST_DEVICE=cuda:0); fi
# (the phase's 180 s: the kernels 130, then NCCL's world of one 50, its own
# counts in summary.json; appended to specs-cuda.log)
env "${dev_env[@]}" timeout -k 5 130 "${busted[@]}" spec/cuda_loader_spec.lua spec/cuda_kernels_spec.lua \
  > "$out/specs-cuda.log" 2>&1
rc=$?
cuda_pass=$(counts "$out/specs-cuda.log" passed); cuda_fail=$(counts "$out/specs-cuda.log" failed)
cuda_pend=$(counts "$out/specs-cuda.log" skipped)
[ "$rc" = 124 ] && echo "gpu-check: the CUDA specs ran past 130 s" >> "$out/specs-cuda.log"
[ "$rc" = 0 ] || status=1
echo "gpu-check: CUDA specs: ${cuda_pass:-?} passed, ${cuda_fail:-?} failed, ${cuda_pend:-0} pending (rc $rc)"
# (NCCL's warnings into the log; its bootstrap on the loopback here, the
# default interface choice in the whole suite's run below)
env "${dev_env[@]}" NCCL_DEBUG="${NCCL_DEBUG:-WARN}" NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
  timeout -k 5 50 "${busted[@]}" spec/cuda_nccl_spec.lua > "$work/nccl.log" 2>&1
rc=$?
nccl_pass=$(counts "$work/nccl.log" passed); nccl_fail=$(counts "$work/nccl.log" failed)
nccl_pend=$(counts "$work/nccl.log" skipped)
[ "$rc" = 124 ] && echo "gpu-check: the NCCL specs ran past 50 s" >> "$work/nccl.log"
{ echo; echo "== spec/cuda_nccl_spec.lua"; cat "$work/nccl.log"; } >> "$out/specs-cuda.log"
[ "$rc" = 0 ] || status=1
echo "gpu-check: NCCL specs: ${nccl_pass:-?} passed, ${nccl_fail:-?} failed, ${nccl_pend:-0} pending (rc $rc)"
phase specs_cuda "$ts"
if [ "$dry" = 1 ]; then rm -rf "$work"; finish "$status"; fi

# ---- 6. the whole suite with a GPU present ----------------------------------------------------
ts=$(date +%s)
timeout -k 5 120 "${busted[@]}" spec > "$out/specs-all.log" 2>&1
rc=$?
phase specs_all "$ts"
all_pass=$(counts "$out/specs-all.log" passed); all_fail=$(counts "$out/specs-all.log" failed)
[ "$rc" = 124 ] && echo "gpu-check: the whole suite ran past 120 s" >> "$out/specs-all.log"
echo "gpu-check: whole suite: ${all_pass:-?} passed, ${all_fail:-?} failed (rc $rc)"

# ---- 7. the benches, lunet then PyTorch ---------------------------------------------------------
ts=$(date +%s)
{
  echo "== bench/gpu.lua"
  timeout -k 5 90 luajit bench/gpu.lua --json "$out/bench-lunet.json" 2>&1 || echo "bench/gpu.lua: exit $?"
  echo "== bench/gpu_torch.py"
  PYTHONUNBUFFERED=1 timeout -k 5 90 python3 bench/gpu_torch.py --json "$out/bench-torch.json" 2>&1 || echo "bench/gpu_torch.py: exit $?"
} > "$out/bench.log" 2>&1
phase bench "$ts"
rm -rf "$work"
finish "$status"
