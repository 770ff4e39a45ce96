#!/usr/bin/env bash
# check-layers.sh -- the include and link rules of c/ (c/README.md says why):
#   - only c/cpu/ includes cblas.h, dnnl.h or omp.h (the CPU backend's libraries);
#   - c/core/ includes only c/core/ and c/include/ headers;
#   - only c/cpu/ includes c/cpu/ headers: front ends (c/nn/, c/ops/), the
#     collectives (c/comm/) and data (c/data/) reach the CPU runtime through
#     core (ln_host_parallel_for, the runtime's parallel_for);
#   - no c/core object references a symbol defined only in an upper layer
#     (c/ops, c/nn, c/cpu, c/comm, c/data): core reaches a backend only
#     through the registry (core/backend.h);
#   - no c/ops, c/nn, c/comm or c/data object references a symbol c/cpu
#     defines, unless lunet.h declares it (the public API).
# Usage: tools/check-layers.sh [BUILD]   (BUILD: the build folder, default build;
# the symbol check needs BUILD/obj, which make builds). Prints each breach and
# exits 1 if there is one.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
build=${1:-${BUILD:-build}}
fail=0
breach() { echo "check-layers: $*" >&2; fail=1; }

# quoted includes, resolved as the compiler does (the file's folder, then -Ic/include)
while IFS= read -r f; do
  dir=$(dirname "$f"); layer=${f#c/}; layer=${layer%%/*}
  while IFS= read -r line; do
    n=${line%%:*}; rest=${line#*:}
    [[ $rest =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*[\<\"]([^\">]+)[\"\>] ]] || continue
    name=${BASH_REMATCH[1]}
    case "${name##*/}" in
      cblas.h|dnnl.h|omp.h)
        [ "$layer" = cpu ] || breach "$f:$n includes <$name>: only c/cpu/ may use the CPU libraries";;
    esac
    if [ -f "$dir/$name" ]; then target=$(realpath -m --relative-to="$root" "$dir/$name")
    elif [ -f "c/include/$name" ]; then target="c/include/$name"
    else continue; fi                         # a system header
    tlayer=${target#c/}; tlayer=${tlayer%%/*}
    case "$layer" in
      core) case "$tlayer" in core|include) ;; *) breach "$f:$n includes $target: c/core/ includes only c/core/ and c/include/";; esac;;
      nn|ops) [ "$tlayer" = cpu ] && breach "$f:$n includes $target: front ends (c/$layer/) include no c/cpu/ header";;
      cpu) ;;
      *) [ "$tlayer" = cpu ] && breach "$f:$n includes $target: only c/cpu/ includes c/cpu/ (c/$layer/ reaches the CPU runtime through core)";;
    esac
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$f")
done < <(find c -name '*.[ch]' | sort)

# symbols: what core objects need that only upper layers define
obj="$build/obj/c"
if [ ! -d "$obj/core" ]; then
  breach "no objects in $obj/core: run make first"
else
  upper=$(for d in ops nn cpu comm data; do
            for o in "$obj/$d"/*.o; do [ -f "$o" ] && nm --defined-only -g "$o" | awk 'NF == 3 { print $3 }'; done
          done | sort -u)
  core=$(for o in "$obj/core"/*.o; do nm --defined-only -g "$o" | awk 'NF == 3 { print $3 }'; done | sort -u)
  for o in "$obj/core"/*.o; do
    for s in $(nm -u "$o" | awk '{ print $NF }' | sort -u | comm -12 - <(printf '%s\n' "$upper") | comm -23 - <(printf '%s\n' "$core")); do
      breach "${o#"$build"/obj/} references $s, defined in an upper layer ($(grep -l "\b$s\b" c/ops/*.c c/nn/*.c c/cpu/*.c c/comm/*.c c/data/*.c 2>/dev/null | head -1))"
    done
  done
  cpu=$(for o in "$obj/cpu"/*.o; do [ -f "$o" ] && nm --defined-only -g "$o" | awk 'NF == 3 { print $3 }'; done | sort -u)
  for d in ops nn comm data; do
    for o in "$obj/$d"/*.o; do
      [ -f "$o" ] || continue
      for s in $(nm -u "$o" | awk '{ print $NF }' | sort -u | comm -12 - <(printf '%s\n' "$cpu")); do
        grep -qw "$s" c/include/lunet.h ||
          breach "${o#"$build"/obj/} references $s, which c/cpu/ defines: only c/cpu/ calls into c/cpu/ (through core: the backend's runtime and kernel table)"
      done
    done
  done
fi
[ "$fail" = 0 ] && echo "check-layers: ok"
exit "$fail"
