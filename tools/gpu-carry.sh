#!/usr/bin/env bash
# gpu-carry.sh BUILD OUT -- what tools/gpu-check.sh needs on a GPU machine
# that the work tree lacks (`make gpu-carry` runs this): the libraries built
# here (liblunet.so, liblunet_cuda.so, the generated FFI declarations), the
# shared libraries liblunet.so needs that such a machine lacks (OpenBLAS,
# oneDNN, libgfortran, libquadmath, libOpenCL, libgomp, libz: xz-compressed),
# /usr/bin/luajit (it needs only libc, libm, libgcc_s), and busted with its
# Lua modules. The device tool carries the work tree plus at most 64 MiB:
# this stops if the folder would be over 40 MiB.
set -euo pipefail
build=${1:-build}
out=${2:-$build/gpu-carry}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
for f in "$build/liblunet.so" "$build/liblunet_cuda.so" lua/lunet/cdef.lua lua/lunet/cdef_internal.lua; do
  [ -f "$f" ] || { echo "gpu-carry: $f is missing: run make first (with nvcc for liblunet_cuda.so)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/stage/lib" "$out/stage/lua/share" "$out/stage/lua/lib"
cp "$build/liblunet.so" "$build/liblunet_cuda.so" "$out/"
cp lua/lunet/cdef.lua lua/lunet/cdef_internal.lua "$out/"
cp /usr/bin/luajit "$out/luajit"
# the libraries liblunet.so loads, by the names it asks for (ldd resolves the links)
for name in libopenblas.so.0 libdnnl.so.2 libgfortran.so.5 libquadmath.so.0 libOpenCL.so.1 libgomp.so.1 libz.so.1; do
  path=$(ldd "$build/liblunet.so" | awk -v n="$name" '$1 == n { print $3 }')
  [ -n "$path" ] || { echo "gpu-carry: ldd does not list $name for $build/liblunet.so" >&2; exit 1; }
  cp -L "$path" "$out/stage/lib/$name"
done
# OpenBLAS loads libgfortran's own needs; check nothing else is missing from that set
cp -rL /usr/share/lua/5.1/. "$out/stage/lua/share/"
cp -rL /usr/lib/x86_64-linux-gnu/lua/5.1/. "$out/stage/lua/lib/"
cp /usr/bin/busted "$out/stage/lua/busted"
tar -C "$out/stage" -cf - lib | xz ${GPU_CARRY_XZ:--3} -T2 > "$out/libs.tar.xz"
tar -C "$out/stage" -cf - lua | xz ${GPU_CARRY_XZ:--3} -T2 > "$out/lua.tar.xz"
rm -rf "$out/stage"
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- c lua Makefile 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  (cd "$out" && sha256sum liblunet.so liblunet_cuda.so cdef.lua cdef_internal.lua luajit libs.tar.xz lua.tar.xz)
} > "$out/MANIFEST"
size=$(du -sb "$out" | cut -f1)
echo "gpu-carry: $out holds $((size / 1024 / 1024)) MiB ($size bytes)"
if [ "$size" -gt $((40 * 1024 * 1024)) ]; then
  echo "gpu-carry: over 40 MiB: the work tree and this must travel in 64 MiB together" >&2
  exit 1
fi
