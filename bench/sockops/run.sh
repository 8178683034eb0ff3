#!/usr/bin/env bash
# The cost of lowlat's sock_ops program per new connection: 'lowlat probe
# crr' (connect, request, response, close; netperf TCP_CRR) to a reflector
# on the namespace's loopback, with and without 'sockets --fix nodelay
# --fix initcwnd=40' on the reflector's port, alternating ROUNDS times.
# The program runs on both ends' establishment (the port is the
# reflector's local port, and the client's connections run it too: it
# looks their port up and finds nothing). Prints the median transactions
# per second of each and their ratio.
#
#   bash bench/sockops/run.sh
#   ROUNDS=7 SECS=5 bash bench/sockops/run.sh
#
# Needs root (namespace, BPF). Traffic stays on the namespace's loopback;
# the namespace, the reflector, the journal and the program are removed on
# exit.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
PORT=7432

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
ns=lowlat-bench-sockops-$$
refl=
export LOWLAT_JOURNAL=$work/journal
# A shared key: the reflector paces peers without one.
export LOWLAT_KEY=bench-sockops-$$
in_ns() { nsenter --net=/run/netns/"$ns" "$@"; }
cleanup() {
	in_ns "$work/lowlat" rollback --all >/dev/null 2>&1 || true
	[ -n "$refl" ] && kill "$refl" 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "run as root (network namespace, BPF)" >&2; exit 1; }
cd "$root"
CGO_ENABLED=0 go build -trimpath -o "$work/lowlat" ./cmd/lowlat
ip netns add "$ns"
ip -n "$ns" link set lo up
# nsenter keeps the host's mounts (bpffs, cgroup2), which ip netns exec hides.
# nsenter execs the reflector, so $! is the reflector itself (a backgrounded
# shell function would be a subshell, and killing it would leave the
# reflector running).
nsenter --net=/run/netns/"$ns" "$work/lowlat" reflector --listen 127.0.0.1:$PORT --quiet >"$work/reflector.log" 2>&1 &
refl=$!
sleep 0.5

crr() {
	in_ns "$work/lowlat" probe crr 127.0.0.1:$PORT --duration "${SECS}s" --request 100 --response 100 --json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["transactions_per_sec"])'
}
off=() on=()
for r in $(seq 1 "$ROUNDS"); do
	off+=("$(crr)")
	in_ns "$work/lowlat" sockets --fix nodelay --fix initcwnd=40 --port $PORT --yes >/dev/null
	on+=("$(crr)")
	in_ns "$work/lowlat" rollback >/dev/null
	echo "round $r: without ${off[-1]} /s, with ${on[-1]} /s" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
echo "kernel $(uname -r), $(nproc) CPUs, $ROUNDS rounds of ${SECS}s, 100-byte request and response"
printf '%-40s %12s\n' "probe crr without the program" "$m_off/s"
printf '%-40s %12s\n' "probe crr with nodelay+initcwnd=40" "$m_on/s"
awk -v a="$m_on" -v b="$m_off" 'BEGIN{printf "%-40s %12.3f\n", "ratio with/without", a/b}'
