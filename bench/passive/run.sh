#!/usr/bin/env bash
# The cost of lowlat's passive measurements (lowlat watch) on the traffic
# they measure: the packets per second one sender pushes over a veth pair
# between two namespaces (64-byte UDP datagrams, or 64-byte TCP writes with
# TCP_NODELAY), with each set of hooks off and on, alternating ROUNDS times
# (medians, and their ratio), with the CPU time the machine spent per
# packet (from /proc/stat); then each hook's CPU time per run, from the
# kernel's BPF statistics in a pass of its own (the statistics cost two
# clock reads a run themselves); the whole cost per hook run (the CPU time
# per packet the hooks added, over their runs per packet); and the maps'
# memory.
#
#   bash bench/passive/run.sh
#   ROUNDS=7 SECS=5 bash bench/passive/run.sh
#   ROUNDS=0 bash bench/passive/run.sh             the per-hook statistics only
#   DSCP=EF ROUNDS=0 bash bench/passive/run.sh     egress split by DSCP class
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

# cpu_busy: the jiffies (1/100 s) all CPUs spent busy so far: user, nice,
# system, irq and softirq (idle, iowait and steal left out).
cpu_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat; }

# pps PROTO: "PKTS_PER_S NS_PER_PKT": the packets per second vb received
# during one SECS run, and the CPU time the whole machine spent per packet
# during it (sender, receiver, softirqs, the hooks, watch itself).
pps() {
	local before after c0 c1
	before=$(ip netns exec "$b" cat /sys/class/net/vb/statistics/rx_packets)
	in_b taskset -c 1 "$work/blast" recv "$1" 10.56.0.2:$PORT "$((SECS + 1))" >/dev/null &
	local rpid=$!
	sleep 0.3
	c0=$(cpu_busy)
	in_a taskset -c 0 "$work/blast" send "$1" 10.56.0.2:$PORT "$SECS" >/dev/null
	c1=$(cpu_busy)
	after=$(ip netns exec "$b" cat /sys/class/net/vb/statistics/rx_packets)
	wait "$rpid" || true
	echo "$(((after - before) / SECS)) $(((c1 - c0) * 10000000 / (after - before + 1)))"
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
		in_a "$work/lowlat" watch --duration "$d" --iface va ${DSCP:+--dscp "$DSCP"} "$@" >"$work/w-a.out" 2>"$work/w-a.err" &
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
# ROUNDS=0: the per-hook statistics only.
[ "$ROUNDS" -gt 0 ] && printf '%-6s %-8s %12s %12s %7s %10s %10s %9s\n' proto hooks "off pkt/s" "on pkt/s" ratio "off ns/pkt" "on ns/pkt" "+ns/pkt"
for proto in udp tcp; do
	for mode in egress rx all; do
		[ "$ROUNDS" -gt 0 ] || break 2
		off=() on=() offc=() onc=()
		for r in $(seq 1 "$ROUNDS"); do
			read -r x c < <(pps "$proto")
			off+=("$x") offc+=("$c")
			watches "$mode" "$proto"
			sleep 1 # attached
			read -r x c < <(pps "$proto")
			on+=("$x") onc+=("$c")
			for p in "${wpids[@]}"; do wait "$p" || true; done
		done
		m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
		c_off=$(median "${offc[@]}") c_on=$(median "${onc[@]}")
		printf '%-6s %-8s %12s %12s %7s %10s %10s %9s\n' "$proto" "$mode" "$m_off" "$m_on" \
			"$(awk -v a="$m_on" -v b="$m_off" 'BEGIN{printf "%.3f", a/b}')" "$c_off" "$c_on" "$((c_on - c_off))"
		echo "$proto $mode $((c_on - c_off))" >>"$work/delta"
	done
done
echo
echo "each hook's CPU time per run (kernel BPF statistics; one run of ${SECS}s per protocol, all hooks on)"
echo "(floor: an empty program on the same tracepoint in the same run; a: the sender's watch, b: the receiver's)"
printf '%-6s %-45s %10s %9s %7s %7s %7s\n' proto hook runs "runs/pkt" "ns/run" floor above
for proto in udp tcp; do
	watches all "$proto" --hook-stats --json
	"$work/blast" empty "$((SECS + 1))" >"$work/empty" &
	epid=$!
	sleep 1
	read -r x c < <(pps "$proto")
	for p in "${wpids[@]}" "$epid"; do wait "$p" || true; done
	for side in a b; do
		python3 - "$work/w-$side.out" "$proto" "$((x * SECS))" "$side" "$work/runs" "$work/empty" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
proto, pkts, side = sys.argv[2], int(sys.argv[3]), sys.argv[4]
floor = {l.split()[0]: float(l.split()[2]) for l in open(sys.argv[6])}
with open(sys.argv[5], "a") as out:
    for h in r.get("hook_stats", []):
        if h["runs"]:
            ns = h["time_ns"] / h["runs"]
            f = floor.get(h["hook"].split(":")[-1])
            print("%-6s %-45s %10d %9.2f %7.0f %7s %7s" % (proto, side + ": " + h["hook"], h["runs"], h["runs"] / pkts, ns,
                  "%.0f" % f if f is not None else "-", "%.0f" % (ns - f) if f is not None else "-"))
            out.write("%s %s %f\n" % (proto, side, h["runs"] / pkts))
PY
	done
done

# The whole cost per hook run: the CPU time a packet gained with the hooks
# on (the tracepoint's machinery, the programs, watch itself, the receive
# timestamps rx turns on) over the hook runs per packet of that mode (side
# a's hooks for egress, side b's for rx, both for all).
[ "$ROUNDS" -gt 0 ] && echo && echo "whole CPU cost per hook run (+ns/pkt over the mode's hook runs per packet)"
[ "$ROUNDS" -gt 0 ] && python3 - "$work/delta" "$work/runs" <<'PY'
import sys
runs = {}
for line in open(sys.argv[2]):
    proto, side, r = line.split()
    runs.setdefault((proto, side), 0.0)
    runs[(proto, side)] += float(r)
for line in open(sys.argv[1]):
    proto, mode, d = line.split()
    sides = {"egress": "a", "rx": "b", "all": "ab"}[mode]
    n = sum(runs.get((proto, s), 0) for s in sides)
    print("%-6s %-8s %+6d ns/pkt over %.2f runs/pkt: %+5.0f ns a run" % (proto, mode, int(d), n, int(d) / n if n else 0))
PY
echo
python3 - "$work/w-a.out" "$work/w-b.out" <<'PY'
import json, sys
for f, side in zip(sys.argv[1:], ("sender: egress of va", "receiver: egress of vb, rx and tcp of the port")):
    r = json.load(open(f))
    print("map memory, %s: %d KiB" % (side, r["map_bytes"] // 1024))
PY
