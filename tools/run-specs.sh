#!/usr/bin/env bash
# Runs the busted specs under LuaJIT (busted's own shebang picks plain Lua).
# Usage: tools/run-specs.sh [spec files or dirs...]; LUNET_LIB picks the .so.
# --no-auto-insulate: lunet is loaded once per process (the FFI metatype of
# tensors is fixed at the first load, so reloading modules per file would
# give tensors stale methods).
set -u
cd "$(dirname "$0")/.."
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;$PWD/spec/?.lua;${LUA_PATH:-;}"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
preload=""
if [ -n "${LUNET_ASAN:-}" ]; then
  preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  # (allocator_may_return_null: a request past ASan's limit, a tensor of
  # 2^40 floats, fails as it does without ASan, and lunet says out of memory)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:allocator_may_return_null=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
[ $# -eq 0 ] && set -- spec
LD_PRELOAD="$preload" luajit /usr/bin/busted --no-auto-insulate --helper=spec/support/helper.lua -o spec/support/handler.lua "$@"
