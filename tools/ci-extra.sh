#!/usr/bin/env bash
# CI extras (called by .ci/run when executable): the packaging smoke test.
# Packs a .src.rock from the COMMITTED tree (luarocks clones HEAD of this
# checkout), installs it offline into a temporary tree, then, from outside
# the checkout, requires lunet, computes, saves and loads a file, and runs
# the installed `lunet` command. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MAKEFLAGS=${MAKEFLAGS:--j2}
unset LUNET_LIB LUA_PATH LUA_CPATH
lr() { luarocks --lua-version=5.1 "$@"; }

echo "== extra: pack lunet-scm-1.src.rock from $root (HEAD)"
sed -E "s|^([[:space:]]*url[[:space:]]*=[[:space:]]*).*|\\1\"git+file://$root\",|" \
  "$root/lunet-scm-1.rockspec" > "$work/lunet-scm-1.rockspec"
cd "$work"
lr pack lunet-scm-1.rockspec >"$work/pack.log" 2>&1 || { cat "$work/pack.log"; exit 1; }
test -f lunet-scm-1.src.rock

echo "== extra: install it offline into $work/tree"
lr install --deps-mode=none --tree="$work/tree" ./lunet-scm-1.src.rock >"$work/install.log" 2>&1 \
  || { tail -40 "$work/install.log"; exit 1; }
eval "$(lr --tree="$work/tree" path)"

echo "== extra: smoke test from /tmp"
cd /tmp
TREE="$work/tree" luajit - <<'LUA'
local lunet = require 'lunet'
local tree = os.getenv('TREE')
-- the modules and the library both come from the installed tree
local src = package.searchpath('lunet', package.path)
assert(src and src:sub(1, #tree) == tree, 'lunet module not from the tree: ' .. tostring(src))
local maps = io.open('/proc/self/maps'):read('*a')
local lib = maps:match('(%S*liblunet%.so)')
assert(lib and lib:sub(1, #tree) == tree, 'liblunet.so not from the tree: ' .. tostring(lib))
local a = lunet.tensor({{1, 2}, {3, 4}})
local b = a:matmul(a) + 1
local want = {{8, 11}, {16, 23}}
for i = 1, 2 do for j = 1, 2 do
  assert(b[i][j]:item() == want[i][j], ('b[%d][%d] = %s'):format(i, j, tostring(b[i][j]:item())))
end end
local path = os.tmpname()
lunet.save(path, {b = b}, {note = 'smoke'})
local t, meta = lunet.load(path)
os.remove(path)
assert(meta.note == 'smoke' and t.b[2][2]:item() == 23)
print('lunet ' .. lunet.version .. ' from ' .. lib .. ': ok')
LUA
out=$(echo '=lunet.ones(2):numel() + 40' | "$work/tree/bin/lunet")
[ "$(echo "$out" | tail -1)" = "42" ] || { echo "installed bin/lunet printed: $out"; exit 1; }
echo "== extra: make install into a prefix, used from /tmp with no paths set"
# (BUILD: the build folder `make test` made; LUNET_BUILD picks another)
make -C "$root" --no-print-directory install BUILD="${LUNET_BUILD:-build}" PREFIX="$work/prefix" \
  >"$work/make-install.log" 2>&1 \
  || { tail -20 "$work/make-install.log"; exit 1; }
unset LUA_PATH LUA_CPATH
out=$("$work/prefix/bin/lunet" -e 'local t = lunet.ones(2, 3) print(t:sum():item())' 2>&1)
[ "$out" = "6" ] || { echo "make-installed bin/lunet printed: $out"; exit 1; }
echo "== extra: packaging smoke test passed"
# reliability: fuzzers, valgrind, soak (bounded: under 2 minutes)
bash "$root/tools/ci-reliability.sh"
bash "$root/tools/ci-examples.sh"
