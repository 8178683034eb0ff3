#!/usr/bin/env bash
# The cost of lowlat's passive measurements (lowlat watch) on the traffic
# they measure: the packets per second one sender pushes over a veth pair
# between two namespaces (64-byte UDP datagrams, or 64-byte TCP writes with
# TCP_NODELAY), with each set of hooks off and on, alternating ROUNDS times
# (medians, and their ratio); then each hook's CPU time per run, from the
# kernel's BPF statistics in a pass of its own (the statistics cost two
# clock reads a run themselves), and the maps' memory.
#
#   bash bench/passive/run.sh
#   ROUNDS=7 SECS=5 bash bench/passive/run.sh
#
# Goal (issue 29): at most 150 ns a packet a hook, at most 5% of the
# packets per second lost. ePPing (PAM 2023) reports over 1 Mpps per core.
#
# Needs root (namespaces, BPF). Traffic stays between the two namespaces,
# which are removed on exit; every sender and watch stops by itself.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
SECS=${SECS:-3}
PORT=7777

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
a=lowlat-bench-pa-$$
b=lowlat-bench-pb-$$
cleanup() {
	ip netns del "$a" 2>/dev/null || true
	ip netns del "$b" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "run as root (network namespaces, BPF)" >&2; exit 1; }
cd "$root"
CGO_ENABLED=0 go build -trimpath -o "$work/lowlat" ./cmd/lowlat
CGO_ENABLED=0 go build -trimpath -o "$work/blast" ./bench/passive/blast
ip netns add "$a"
ip netns add "$b"
ip link add va netns "$a" type veth peer vb netns "$b"
ip -n "$a" addr add 10.56.0.1/24 dev va
ip -n "$b" addr add 10.56.0.2/24 dev vb
for n in "$a" "$b"; do ip -n "$n" link set lo up; done
ip -n "$a" link set va up
ip -n "$b" link set vb up
# A queueing discipline, as a NIC has (a veth is noqueue by default, whose
# packets skip the qdisc layer's queue: nothing for egress to measure).
ip netns exec "$a" tc qdisc replace dev va root pfifo_fast
ip netns exec "$b" tc qdisc replace dev vb root pfifo_fast
in_a() { nsenter --net=/run/netns/"$a" "$@"; }
in_b() { nsenter --net=/run/netns/"$b" "$@"; }

# pps PROTO: packets per second vb received during one SECS run.
pps() {
	local before after
	before=$(ip netns exec "$b" cat /sys/class/net/vb/statistics/rx_packets)
	in_b "$work/blast" recv "$1" 10.56.0.2:$PORT "$((SECS + 1))" >/dev/null &
	local rpid=$!
	sleep 0.3
	in_a "$work/blast" send "$1" 10.56.0.2:$PORT "$SECS" >/dev/null
	wait "$rpid" || true
	after=$(ip netns exec "$b" cat /sys/class/net/vb/statistics/rx_packets)
	echo $(((after - before) / SECS))
}

# watches MODE PROTO [--hook-stats --json]: starts the watches of MODE in
# the background (each stops after the run); their pids go to wpids.
wpids=()
watches() {
	local mode=$1 proto=$2
	shift 2
	local d=$((SECS + 2))s
	wpids=()
	if [ "$mode" = egress ] || [ "$mode" = all ]; then
		in_a "$work/lowlat" watch --duration "$d" --iface va "$@" >"$work/w-a.out" 2>"$work/w-a.err" &
		wpids+=($!)
	fi
	if [ "$mode" = rx ] || [ "$mode" = all ]; then
		local dev=lo # rx alone: egress only on the idle loopback
		[ "$mode" = all ] && dev=vb
		in_b "$work/lowlat" watch --duration "$d" --iface "$dev" --port "$proto/$PORT" "$@" >"$work/w-b.out" 2>"$work/w-b.err" &
		wpids+=($!)
	fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "kernel $(uname -r), $(nproc) CPUs, $ROUNDS rounds of ${SECS}s, 64-byte messages over a veth pair"
printf '%-6s %-8s %14s %14s %8s\n' proto hooks "off (pkt/s)" "on (pkt/s)" ratio
for proto in udp tcp; do
	for mode in egress rx all; do
		off=() on=()
		for r in $(seq 1 "$ROUNDS"); do
			off+=("$(pps "$proto")")
			watches "$mode" "$proto"
			sleep 1 # attached
			on+=("$(pps "$proto")")
			for p in "${wpids[@]}"; do wait "$p" || true; done
		done
		m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
		printf '%-6s %-8s %14s %14s %8s\n' "$proto" "$mode" "$m_off" "$m_on" "$(awk -v a="$m_on" -v b="$m_off" 'BEGIN{printf "%.3f", a/b}')"
	done
done

echo
echo "each hook's CPU time per run (kernel BPF statistics; one run of ${SECS}s per protocol, all hooks on)"
printf '%-6s %-45s %12s %10s\n' proto hook runs "ns/run"
for proto in udp tcp; do
	watches all "$proto" --hook-stats --json
	sleep 1
	pps "$proto" >/dev/null
	for p in "${wpids[@]}"; do wait "$p" || true; done
	for f in "$work/w-a.out" "$work/w-b.out"; do
		python3 - "$f" "$proto" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for h in r.get("hook_stats", []):
    if h["runs"]:
        print("%-6s %-45s %12d %10.0f" % (sys.argv[2], h["hook"], h["runs"], h["time_ns"] / h["runs"]))
PY
	done
done
echo
python3 - "$work/w-a.out" "$work/w-b.out" <<'PY'
import json, sys
for f, side in zip(sys.argv[1:], ("sender: egress of va", "receiver: egress of vb, rx and tcp of the port")):
    r = json.load(open(f))
    print("map memory, %s: %d KiB" % (side, r["map_bytes"] // 1024))
PY
