#!/usr/bin/env bash
# Benchmarks lowlat's measurement engine against irtt and sockperf on loopback,
# side by side in one run, and prints a table with ratios (see docs/probe.md).
#
#   bash bench/probe/run.sh                  # full run (~2 minutes)
#   DUR=5s CONNS=10000 bash bench/probe/run.sh
#   BEFORE_REV=ff13157 bash bench/probe/run.sh   # also run that revision's TCP
#                                                # ping-pong, round by round
#
# TCP ping-pong: ROUNDS rounds of TCPDUR each, lowlat and sockperf alternating,
# medians over the rounds (the machine is shared; one run says little).
# sockperf reports half the round trip unless told --full-rtt; it is told, and
# its per-message log (--full-log) is replayed through the same
# coordinated-omission correction as lowlat's rtt_us, so both columns compare
# like with like: "service" is each message's own round trip, "rtt" is the
# latency from the intended send time.
#
# Needs root for apt-get only when irtt or sockperf are missing. Traffic goes to
# 127.0.0.1 only; every process started here is killed on exit.
set -euo pipefail

DUR=${DUR:-10s}          # UDP runs at 10 ms
DUR1=${DUR1:-5s}         # UDP runs at 1 ms
TCPDUR=${TCPDUR:-3}      # seconds per ping-pong round
ROUNDS=${ROUNDS:-5}      # ping-pong rounds per tool
MPS=${MPS:-10000}        # ping-pong messages per second
CONNS=${CONNS:-10000}    # connections for the many-connections run
CONNDUR=${CONNDUR:-10s}
PORT=${PORT:-17431}
BPORT=${BPORT:-17441}    # the BEFORE_REV reflector
IRTT_PORT=${IRTT_PORT:-12112}
SP_PORT=${SP_PORT:-11211}
BEFORE_REV=${BEFORE_REV:-}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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
B=
if [ -n "$BEFORE_REV" ]; then
	echo "building lowlat at $BEFORE_REV" >&2
	mkdir "$work/before"
	git -C "$root" archive "$BEFORE_REV" | tar -x -C "$work/before"
	(cd "$work/before" && CGO_ENABLED=0 go build -o "$work/lowlat-before" ./cmd/lowlat)
	B=$work/lowlat-before
fi

# --max-conns-per-ip 0: the many-connections run holds $CONNS connections
# from 127.0.0.1, past the default per-address cap of 64.
"$L" reflector --listen "127.0.0.1:$PORT" --min-interval 1ms --max-conns-per-ip 0 --quiet 2>"$work/reflector.log" &
pids+=($!); refl=$!
if [ -n "$B" ]; then
	"$B" reflector --listen "127.0.0.1:$BPORT" --min-interval 1ms --quiet 2>"$work/reflector-before.log" &
	pids+=($!)
fi
irtt server -b "127.0.0.1:$IRTT_PORT" -i 0 >"$work/irtt-server.log" 2>&1 &
pids+=($!)
sockperf server --tcp -i 127.0.0.1 -p "$SP_PORT" >"$work/sockperf-server.log" 2>&1 &
pids+=($!); sps=$!
sleep 1
for p in "$refl" "$sps"; do
	if ! kill -0 "$p" 2>/dev/null; then
		echo "a server did not start (port taken? PORT, BPORT, SP_PORT, IRTT_PORT choose others):" >&2
		cat "$work"/reflector*.log "$work/sockperf-server.log" >&2
		exit 1
	fi
done

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

# TCP ping-pong, one connection at $MPS/s. Each round appends one line per tool
# to $work/pp: "TOOL rtt_p50 rtt_p99 service_p50 service_p99".
pp_lowlat() { # binary port tag
	"$1" probe tcp "127.0.0.1:$2" --connections 1 --rate "$MPS" --duration "${TCPDUR}s" --json -o "$work/t.json" >/dev/null
	py "
import json; r=json.load(open('$work/t.json')); s=r.get('service_us') or r['rtt_us']
print('$3', r['rtt_us']['p50'], r['rtt_us']['p99'], s['p50'], s['p99'])" >>"$work/pp"
}
pp_sockperf() {
	sockperf ping-pong --tcp -i 127.0.0.1 -p "$SP_PORT" -m 64 --mps "$MPS" -t "$TCPDUR" --full-rtt \
		--full-log "$work/sp.csv" >"$work/sp.txt" 2>&1 || true
	py "
import csv
rows=[]
for f in csv.reader(open('$work/sp.csv')):
    try: rows.append((int(f[0]), float(f[1]), float(f[2])))
    except (ValueError, IndexError): pass
period=1.0/$MPS
k0, t0 = rows[0][0], rows[0][1]
svc, co, ideal = [], [], float('-inf')
for k, tx, rx in rows:
    intended = t0 + (k-k0)*period
    s = rx - tx
    start = max(intended, ideal)
    ideal = start + s
    svc.append(s*1e6); co.append((ideal-intended)*1e6)
q=lambda v,p: round(sorted(v)[min(len(v)-1,int(p*len(v)))],1)
print('sockperf', q(co,.5), q(co,.99), q(svc,.5), q(svc,.99))" >>"$work/pp"
}
: >"$work/pp"
for r in $(seq "$ROUNDS"); do
	echo "tcp ping-pong round $r/$ROUNDS" >&2
	pp_lowlat "$L" "$PORT" lowlat
	pp_sockperf
	if [ -n "$B" ]; then pp_lowlat "$B" "$BPORT" before; fi
done
# med TOOL FIELD: the median over the rounds (fields 2..5 as above).
med() { awk -v t="$1" -v f="$2" '$1==t {print $f}' "$work/pp" | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print ""}'; }

echo "tcp $CONNS connections x 1 req/s" >&2
cputime "$L" probe tcp "127.0.0.1:$PORT" --connections "$CONNS" --rate "$CONNS" --duration "$CONNDUR" --json -o "$work/c.json" >/dev/null
read -r cpu_c rss_kb <"$work/cpu"
read -r c_conns c_req c_err c_50 c_99 < <(py "import json; r=json.load(open('$work/c.json')); print(r['connections'], r['requests'], r['errors'], r['rtt_us']['p50'], r['rtt_us']['p99'])")
refl_rss=$(awk '/VmHWM/ {print $2}' "/proc/$refl/status")

ratio() { py "a,b=float('$1' or 0),float('$2' or 0); print('%.2f' % (a/b) if b else 'n/a')"; }
row() { printf '%-40s %12s %12s %8s\n' "$1" "$2" "$3" "$4"; }

printf '\n'
row "measurement (loopback)" "lowlat" "peer" "ratio"
row "udp 10ms p50 RTT µs (vs irtt)" "$l10_50" "$i10_50" "$(ratio "$l10_50" "$i10_50")"
row "udp 10ms p99 RTT µs (vs irtt)" "$l10_99" "$i10_99" "$(ratio "$l10_99" "$i10_99")"
row "udp 10ms CPU ms / 1000 probes" "$l10_cpu" "$i10_cpu" "$(ratio "$l10_cpu" "$i10_cpu")"
row "udp 1ms p50 RTT µs (vs irtt)" "$l1_50" "$i1_50" "$(ratio "$l1_50" "$i1_50")"
row "udp 1ms p99 RTT µs (vs irtt)" "$l1_99" "$i1_99" "$(ratio "$l1_99" "$i1_99")"
row "udp 1ms CPU ms / 1000 probes" "$l1_cpu" "$i1_cpu" "$(ratio "$l1_cpu" "$i1_cpu")"
for f in 4:"service p50" 5:"service p99" 2:"rtt p50 (CO)" 3:"rtt p99 (CO)"; do
	a=$(med lowlat "${f%%:*}"); b=$(med sockperf "${f%%:*}")
	row "tcp ping-pong ${f#*:} µs (vs sockperf)" "$a" "$b" "$(ratio "$a" "$b")"
done
if [ -n "$B" ]; then
	for f in 4:"service p50" 5:"service p99" 2:"rtt p50 (CO)" 3:"rtt p99 (CO)"; do
		a=$(med lowlat "${f%%:*}"); b=$(med before "${f%%:*}")
		row "tcp ping-pong ${f#*:} µs (vs $BEFORE_REV)" "$a" "$b" "$(ratio "$a" "$b")"
	done
fi
row "tcp $CONNS conns: connected" "$c_conns" "$CONNS" "$(ratio "$c_conns" "$CONNS")"
row "tcp $CONNS conns: requests/errors" "$c_req/$c_err" "" ""
row "tcp $CONNS conns: p50 / p99 µs" "$c_50" "$c_99" ""
row "tcp $CONNS conns: probe max RSS MB" "$((rss_kb / 1024))" "300 (goal)" "$(ratio "$((rss_kb / 1024))" 300)"
row "tcp $CONNS conns: reflector RSS MB" "$((refl_rss / 1024))" "" ""
row "tcp $CONNS conns: probe CPU s" "$cpu_c" "" ""
echo "udp timestamps: $l10_ts"
echo "tcp ping-pong rounds (tool rtt_p50 rtt_p99 service_p50 service_p99, µs):"
sed 's/^/  /' "$work/pp"
