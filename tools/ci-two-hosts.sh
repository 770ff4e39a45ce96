#!/usr/bin/env bash
# ci-two-hosts.sh -- lunet.distributed over two hosts made on one machine:
# two network namespaces (each with its own hostname: a UTS namespace too)
# joined by a veth pair, Open MPI's TCP transport between them, and its
# remote launch agent a script that enters the other namespace (the role of
# ssh). Proves that nothing assumes shared memory or one host: every
# collective against the local backend (spec/mpi/ops.lua), and a rank of one
# host killed with SIGKILL named by the ranks of both hosts (spec/mpi/kill.lua).
# Needs root (ip netns: CAP_SYS_ADMIN and CAP_NET_ADMIN). Prints
# "two hosts: ok" or "two hosts failed: <why>" and exits 0 or 1.
#   tools/ci-two-hosts.sh [NP_PER_HOST]   (default 2)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
per=${1:-2}
a=lunet_ci_a$$ b=lunet_ci_b$$
work=$(mktemp -d)
fail() { echo "two hosts failed: $*"; cleanup; exit 1; }
cleanup() {
  ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)"
[ -f build/liblunet_mpi.so ] || fail "build/liblunet_mpi.so not built (make)"
ip netns add "$a" 2>"$work/err" || fail "ip netns add: $(cat "$work/err") (needs root with CAP_SYS_ADMIN)"
ip netns add "$b" || fail "ip netns add $b"
ip link add va$$ type veth peer name vb$$ 2>"$work/err" || fail "veth: $(cat "$work/err")"
ip link set va$$ netns "$a" && ip link set vb$$ netns "$b" || fail "moving the veth ends"
ip -n "$a" addr add 10.77.0.1/24 dev va$$ && ip -n "$b" addr add 10.77.0.2/24 dev vb$$ || fail "addresses"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set va$$ up && ip -n "$b" link set vb$$ up || fail "links up"
# reachable: a TCP connection to a closed port is refused (no ping needed)
reach=$(ip netns exec "$a" timeout 5 bash -c 'echo > /dev/tcp/10.77.0.2/9' 2>&1)
[[ $reach == *refused* ]] || fail "host a cannot reach host b over the veth pair: $reach"

# the launch agent: "agent HOST command..." runs the command on that host
cat > "$work/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  10.77.0.1|hosta) ns=$a name=hosta ;;
  10.77.0.2|hostb) ns=$b name=hostb ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns unshare --uts sh -c "hostname \$name; \$*"
AGENT
chmod +x "$work/agent"

# mpirun on host a; ranks 0..per-1 on host a, the rest on host b. Only the
# TCP transport between processes (no shared memory: they are two hosts),
# over the veth network only; its session folders in $work (a killed job leaves them).
launch() {  # launch DEADLINE SCRIPT [ENV=VALUE ...]
  local deadline=$1 script=$2; shift 2
  local xs=""
  for v in "$@"; do xs="$xs -x $v"; done
  ip netns exec "$a" unshare --uts sh -c "hostname hosta; cd '$root' && timeout -s KILL $deadline \
    mpirun --allow-run-as-root --oversubscribe --bind-to none -H 10.77.0.1:$per,10.77.0.2:$per -np $((2 * per)) \
    --mca plm_rsh_agent '$work/agent' --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
    --mca oob_tcp_if_include 10.77.0.0/24 --mca orte_tmpdir_base '$work' ${EXTRA_MCA:-} \
    -x LUA_PATH='$root/lua/?.lua;$root/lua/?/init.lua;;' $xs luajit spec/mpi/$script" 2>&1
}

n=$((2 * per))
out=$(launch 120 ops.lua)
echo "$out" > "$work/ops.out"
grep -q "FAIL" <<<"$out" && fail "a collective differs from the local backend across hosts:
$(grep FAIL <<<"$out")"
for r in $(seq 0 $((n - 1))); do
  grep -q "^rank $r done" <<<"$out" || fail "rank $r did not finish the collectives:
$out"
done
echo "two hosts: $(grep -c ' ok ' <<<"$out") collective checks passed on $n ranks over hosta and hostb"

# The kill: the last rank (on hostb) kills itself (SIGKILL) in a loop of
# all-reduces; every other rank must raise an error naming it within 30 s.
# By default mpirun ends the whole job the moment the victim dies, which can
# end a survivor before it has noticed: it is told not to
# (orte_abort_on_non_zero_status 0), and this script ends mpirun once every
# survivor has reported (or 30 s have passed), as mpirun then waits on.
victim=$((n - 1))
mkdir -p "$work/kill"
EXTRA_MCA="--mca orte_abort_on_non_zero_status 0" launch 60 kill.lua SPEC_REPORT_DIR="$work/kill" \
  > "$work/kill.out" 2>&1 &
job=$!
reported() { cat "$work"/kill/rank* 2>/dev/null | grep -c "^rank [0-9]* error at step" || true; }
for _ in $(seq 600); do
  grep -qs " dies" "$work/kill/rank$victim" && break
  sleep 0.1
done
ms() { echo $(( $(date +%s%N) / 1000000 )); }
start=$(ms)
while [ "$(reported)" -lt $((n - 1)) ] && [ $(( $(ms) - start )) -lt 30000 ]; do sleep 0.1; done
took=$(( $(ms) - start ))
sleep 0.5
pkill -KILL -f "luajit spec/mpi/kill.lua" 2>/dev/null
wait $job 2>/dev/null
# (each rank's report also in a file of its own: mpirun can lose the stdout
# of the ranks that end)
out="$(cat "$work/kill.out")
$(cat "$work"/kill/rank* 2>/dev/null)"
line=$(grep -m1 "^rank $victim pid" <<<"$out") || fail "the victim did not start:
$out"
pid=$(awk '{print $4}' <<<"$line"); host=$(awk '{print $6}' <<<"$line")
[ "$host" = hostb ] || fail "the victim runs on $host, not hostb"
# Every survivor names it: its peer on hostb, which sees it die, and the
# ranks on hosta through their liveness connections to it
# (c/comm/liveness.c), looked at every 10 ms of a wait. The victim dies
# after its step 19's all-reduce; a survivor still waiting in its own step
# 19 (on another rank) when the death is seen raises it there.
named=0 missed=""
for r in $(seq 0 $((n - 2))); do
  if grep -Eq "^rank $r error at step (19|20): .*allreduce: rank $victim \(host hostb, pid $pid\) is gone" <<<"$out"; then
    named=$((named + 1))
  else
    missed="$missed $r"
  fi
done
[ -z "$missed" ] || fail "rank(s)$missed did not name the lost rank $victim (host hostb, pid $pid) within 30 s:
$out"
echo "two hosts: rank $victim (hostb, pid $pid) killed; all $named others named it within $took ms of its death (seen every 100 ms)"
echo "two hosts: ok"
