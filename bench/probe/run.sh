#!/usr/bin/env bash
# Benchmarks lowlat's measurement engine against irtt and sockperf on loopback,
# side by side in one run, and prints a table with ratios (see docs/probe.md).
#
#   bash bench/probe/run.sh            # full run (~2 minutes)
#   DUR=5s CONNS=10000 bash bench/probe/run.sh
#
# Needs root for apt-get only when irtt or sockperf are missing. Traffic goes to
# 127.0.0.1 only; every process started here is killed on exit.
set -euo pipefail

DUR=${DUR:-10s}          # UDP runs at 10 ms
DUR1=${DUR1:-5s}         # UDP runs at 1 ms
TCPDUR=${TCPDUR:-5s}     # ping-pong runs
CONNS=${CONNS:-10000}    # connections for the many-connections run
CONNDUR=${CONNDUR:-10s}
PORT=${PORT:-17431}
IRTT_PORT=${IRTT_PORT:-12112}
SP_PORT=${SP_PORT:-11211}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

need=()
command -v irtt >/dev/null || need+=(irtt)
command -v sockperf >/dev/null || need+=(sockperf)
if ((${#need[@]})); then
	echo "installing ${need[*]}" >&2
	apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi
[ -x /usr/bin/time ] || { apt-get install -y -qq time >&2; }

echo "building lowlat" >&2
(cd "$root" && CGO_ENABLED=0 go build -o "$work/lowlat" ./cmd/lowlat)
L=$work/lowlat

"$L" reflector --listen "127.0.0.1:$PORT" --min-interval 1ms --quiet 2>"$work/reflector.log" &
pids+=($!); refl=$!
irtt server -b "127.0.0.1:$IRTT_PORT" -i 0 >"$work/irtt-server.log" 2>&1 &
pids+=($!)
sockperf server --tcp -i 127.0.0.1 -p "$SP_PORT" >"$work/sockperf-server.log" 2>&1 &
pids+=($!)
sleep 1

# cputime CMD...: runs CMD under /usr/bin/time, prints "user+sys seconds" to $work/cpu.
cputime() { /usr/bin/time -f "%U %S %M" -o "$work/time" "$@"; awk '{print $1+$2, $3}' "$work/time" >"$work/cpu"; }

py() { python3 -c "$@"; }

udp_lowlat() { # interval duration -> "p50 p99 cpu_per_1000"
	cputime "$L" probe udp "127.0.0.1:$PORT" --interval "$1" --duration "$2" --json -o "$work/u.json" >/dev/null
	py "
import json; r=json.load(open('$work/u.json')); cpu=float(open('$work/cpu').read().split()[0])
print(r['rtt_us']['p50'], r['rtt_us']['p99'], round(cpu/r['sent']*1000*1000,1), r['timestamps'])"
}

udp_irtt() { # interval duration -> "p50 p99 cpu_per_1000"
	cputime irtt client -i "$1" -d "$2" -Q -o "$work/i.json" "127.0.0.1:$IRTT_PORT"
	py "
import json; d=json.load(open('$work/i.json')); cpu=float(open('$work/cpu').read().split()[0])
v=sorted(x['delay']['rtt'] for x in d['round_trips'] if x.get('delay',{}).get('rtt'))
q=lambda p: v[min(len(v)-1,int(p*len(v)))]/1000
print(round(q(.5),1), round(q(.99),1), round(cpu/len(d['round_trips'])*1000*1000,1), 'userspace')"
}

echo "udp 10ms: lowlat" >&2; read -r l10_50 l10_99 l10_cpu l10_ts < <(udp_lowlat 10ms "$DUR")
echo "udp 10ms: irtt" >&2;   read -r i10_50 i10_99 i10_cpu _ < <(udp_irtt 10ms "$DUR")
echo "udp 1ms: lowlat" >&2;  read -r l1_50 l1_99 l1_cpu _ < <(udp_lowlat 1ms "$DUR1")
echo "udp 1ms: irtt" >&2;    read -r i1_50 i1_99 i1_cpu _ < <(udp_irtt 1ms "$DUR1")

echo "tcp ping-pong: lowlat" >&2
"$L" probe tcp "127.0.0.1:$PORT" --connections 1 --rate 10000 --duration "$TCPDUR" --json -o "$work/t.json" >/dev/null
read -r lt_50 lt_99 < <(py "import json; r=json.load(open('$work/t.json')); print(r['rtt_us']['p50'], r['rtt_us']['p99'])")
echo "tcp ping-pong: sockperf" >&2
sockperf ping-pong --tcp -i 127.0.0.1 -p "$SP_PORT" -m 64 --mps 10000 -t "${TCPDUR%s}" >"$work/sp.txt" 2>&1 || true
sp_50=$(awk '/percentile 50.000/ {print $NF}' "$work/sp.txt" | tail -1)
sp_99=$(awk '/percentile 99.000/ {print $NF}' "$work/sp.txt" | tail -1)

echo "tcp $CONNS connections x 1 req/s" >&2
cputime "$L" probe tcp "127.0.0.1:$PORT" --connections "$CONNS" --rate "$CONNS" --duration "$CONNDUR" --json -o "$work/c.json" >/dev/null
read -r cpu_c rss_kb <"$work/cpu"
read -r c_conns c_req c_err c_50 c_99 < <(py "import json; r=json.load(open('$work/c.json')); print(r['connections'], r['requests'], r['errors'], r['rtt_us']['p50'], r['rtt_us']['p99'])")
refl_rss=$(awk '/VmHWM/ {print $2}' "/proc/$refl/status")

ratio() { py "a,b=float('$1' or 0),float('$2' or 0); print('%.2f' % (a/b) if b else 'n/a')"; }

printf '\n%-34s %12s %12s %8s\n' "measurement (loopback)" "lowlat" "peer" "ratio"
printf '%-34s %12s %12s %8s\n' "udp 10ms p50 RTT µs (vs irtt)" "$l10_50" "$i10_50" "$(ratio "$l10_50" "$i10_50")"
printf '%-34s %12s %12s %8s\n' "udp 10ms p99 RTT µs (vs irtt)" "$l10_99" "$i10_99" "$(ratio "$l10_99" "$i10_99")"
printf '%-34s %12s %12s %8s\n' "udp 10ms CPU ms / 1000 probes" "$l10_cpu" "$i10_cpu" "$(ratio "$l10_cpu" "$i10_cpu")"
printf '%-34s %12s %12s %8s\n' "udp 1ms p50 RTT µs (vs irtt)" "$l1_50" "$i1_50" "$(ratio "$l1_50" "$i1_50")"
printf '%-34s %12s %12s %8s\n' "udp 1ms p99 RTT µs (vs irtt)" "$l1_99" "$i1_99" "$(ratio "$l1_99" "$i1_99")"
printf '%-34s %12s %12s %8s\n' "udp 1ms CPU ms / 1000 probes" "$l1_cpu" "$i1_cpu" "$(ratio "$l1_cpu" "$i1_cpu")"
printf '%-34s %12s %12s %8s\n' "tcp ping-pong p50 µs (vs sockperf)" "$lt_50" "${sp_50:-n/a}" "$(ratio "$lt_50" "${sp_50:-0}")"
printf '%-34s %12s %12s %8s\n' "tcp ping-pong p99 µs (vs sockperf)" "$lt_99" "${sp_99:-n/a}" "$(ratio "$lt_99" "${sp_99:-0}")"
printf '%-34s %12s %12s %8s\n' "tcp $CONNS conns: connected" "$c_conns" "$CONNS" "$(ratio "$c_conns" "$CONNS")"
printf '%-34s %12s %12s %8s\n' "tcp $CONNS conns: requests/errors" "$c_req/$c_err" "" ""
printf '%-34s %12s %12s %8s\n' "tcp $CONNS conns: p50 / p99 µs" "$c_50" "$c_99" ""
printf '%-34s %12s %12s %8s\n' "tcp $CONNS conns: probe max RSS MB" "$((rss_kb / 1024))" "300 (goal)" "$(ratio "$((rss_kb / 1024))" 300)"
printf '%-34s %12s %12s %8s\n' "tcp $CONNS conns: reflector RSS MB" "$((refl_rss / 1024))" "" ""
printf '%-34s %12s %12s %8s\n' "tcp $CONNS conns: probe CPU s" "$cpu_c" "" ""
echo "udp timestamps: $l10_ts"
