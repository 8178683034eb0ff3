#!/usr/bin/env bash
# Benchmarks 'lowlat monitor' (see docs/monitor.md), side by side in one run:
#
# 1. Peer: lowlat monitor and Debian's prometheus-smokeping-prober ping the
#    same HOSTS ICMP targets (addresses in a namespace this script makes) at
#    the same interval, at the same time, for WINDOW. Reported: CPU per 1,000
#    probes and RSS of each, and the medians each reports for one target
#    (classic buckets the same way for both, lowlat's native histogram, and
#    'lowlat probe icmp' on the same path).
# 2. Soak: TARGETS udp targets at SOAK_INTERVAL against a reflector in the
#    namespace for SOAK. Reported: RSS at the start and every minute, CPU as
#    a percentage of one core.
#
#   bash bench/monitor/run.sh                       # ~12 minutes
#   SOAK=1m WINDOW=30s bash bench/monitor/run.sh    # a quick look
#   PARTS=soak bash bench/monitor/run.sh            # one part (peer, soak)
#
# Needs root (a network namespace, raw ICMP sockets). Traffic goes to
# addresses inside the namespace only; everything is removed on exit.
set -euo pipefail

WINDOW=${WINDOW:-60s}           # the peer comparison
HOSTS=${HOSTS:-20}              # ICMP targets
INTERVAL=${INTERVAL:-100ms}     # per ICMP target
SOAK=${SOAK:-10m}
TARGETS=${TARGETS:-20}          # soak udp targets
SOAK_INTERVAL=${SOAK_INTERVAL:-100ms}
PARTS=${PARTS:-peer soak}
MPORT=${MPORT:-19431}
SPORT=${SPORT:-19374}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root (network namespace, raw ICMP)" >&2; exit 1; }
command -v prometheus-smokeping-prober >/dev/null || {
	echo "installing prometheus-smokeping-prober" >&2
	apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-smokeping-prober >&2
}

work=$(mktemp -d)
ns=lowlat-bench-$$
vh=lb$$h vn=lb$$n # the veth pair, here and in the namespace
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip link del "$vh" 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

secs() { awk -v d="$1" 'BEGIN{ if (d ~ /ms$/) print substr(d,1,length(d)-2)/1000; else if (d ~ /m$/) print substr(d,1,length(d)-1)*60; else print d+0 }'; }

echo "building lowlat" >&2
(cd "$root" && CGO_ENABLED=0 go build -o "$work/lowlat" ./cmd/lowlat && go build -o "$work/scrape" ./bench/monitor/scrape)
L=$work/lowlat

# The namespace: 10.80.0.1 here, 10.80.0.2..(HOSTS+1) there.
ip netns add "$ns"
ip link add "$vh" type veth peer name "$vn" netns "$ns"
ip addr add 10.80.0.1/24 dev "$vh"
ip link set "$vh" up
ip -n "$ns" link set lo up
ip -n "$ns" link set "$vn" up
for i in $(seq 2 $((HOSTS + 1))); do ip -n "$ns" addr add "10.80.0.$i/24" dev "$vn"; done
hosts=$(seq -f '10.80.0.%g' 2 $((HOSTS + 1)) | tr '\n' ' ')

# per1k CPU_S PROBES: CPU milliseconds per 1,000 probes.
per1k() { awk -v c="$1" -v n="$2" 'BEGIN{ if (n>0) printf "%.1f", 1e6*c/n; else print "n/a" }'; }
# cpu_s PID: user+system CPU seconds so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }
# rss_split PID: "anon/file" KiB, the two parts of RSS (file: the executable
# and libraries, which the kernel maps in whole folios around each fault).
rss_split() { awk '/^RssAnon:/{a=$2} /^RssFile:/{f=$2} END{print a "/" f}' "/proc/$1/status"; }
# sum_metric PORT NAME: the sum of every series of NAME on that endpoint.
sum_metric() { python3 -c '
import sys, urllib.request
s = 0
for l in urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode().splitlines():
    f = l.split()
    if len(f) == 2 and (f[0] == sys.argv[2] or f[0].startswith(sys.argv[2] + "{")):
        s += float(f[1])
print(int(s))' "$1" "$2"; }

# --- 1. lowlat monitor vs smokeping_prober -----------------------------------
if [[ " $PARTS " == *" peer "* ]]; then
{
	echo "listen = \"127.0.0.1:$MPORT\""
	echo 'doctor_interval = "0s"'
	echo "journal = \"$work/journal\""
	i=0
	for h in $hosts; do
		i=$((i + 1))
		printf '[[target]]\nname = "h%d"\nkind = "icmp"\naddress = "%s"\ninterval = "%s"\n' "$i" "$h" "$INTERVAL"
	done
} >"$work/icmp.toml"
"$L" monitor --config "$work/icmp.toml" 2>"$work/monitor-icmp.log" &
mpid=$!
pids+=("$mpid")
# shellcheck disable=SC2086
prometheus-smokeping-prober --privileged -i "$INTERVAL" --web.listen-address="127.0.0.1:$SPORT" --log.level=warn $hosts 2>"$work/smokeping.log" &
spid=$!
pids+=("$spid")
sleep 5 # both settle; then the window starts
m0=$(cpu_s "$mpid") s0=$(cpu_s "$spid")
mp0=$(sum_metric "$MPORT" lowlat_probe_sent_total) sp0=$(sum_metric "$SPORT" smokeping_requests_total)
echo "peer window: $HOSTS ICMP targets every $INTERVAL, $WINDOW" >&2
# 'lowlat probe icmp' on the same path in the window's last 10 s: the same
# conditions (a busy CPU answers a veth round trip faster than an idle one).
sleep "$(awk -v w="$(secs "$WINDOW")" 'BEGIN{print w-11}')"
"$L" probe icmp 10.80.0.2 --interval "$INTERVAL" --duration 10s --json >"$work/probe-icmp.json" &
ppid=$!
sleep 11
wait "$ppid"
m1=$(cpu_s "$mpid") s1=$(cpu_s "$spid")
mp1=$(sum_metric "$MPORT" lowlat_probe_sent_total) sp1=$(sum_metric "$SPORT" smokeping_requests_total)
mrss=$(rss_kb "$mpid") srss=$(rss_kb "$spid")
msplit=$(rss_split "$mpid") ssplit=$(rss_split "$spid")
mmed=$("$work/scrape" "http://127.0.0.1:$MPORT/metrics" lowlat_probe_rtt_seconds target=h1)
smed=$("$work/scrape" "http://127.0.0.1:$SPORT/metrics" smokeping_response_duration_seconds ip=10.80.0.2)
pmed=$(python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["rtt_us"]["p50"]/1000))' "$work/probe-icmp.json")
kill "$mpid" "$spid"
wait "$mpid" "$spid" 2>/dev/null || true

mcpu=$(awk -v a="$m0" -v b="$m1" 'BEGIN{print b-a}') scpu=$(awk -v a="$s0" -v b="$s1" 'BEGIN{print b-a}')
echo
echo "== lowlat monitor vs prometheus-smokeping-prober: $HOSTS ICMP targets every $INTERVAL for $WINDOW, side by side =="
printf '%-28s %12s %14s %16s %10s %16s\n' tool probes "CPU s" "CPU ms/1k probes" "RSS KiB" "anon/file KiB"
printf '%-28s %12s %14s %16s %10s %16s\n' "lowlat monitor" $((mp1 - mp0)) "$mcpu" "$(per1k "$mcpu" $((mp1 - mp0)))" "$mrss" "$msplit"
printf '%-28s %12s %14s %16s %10s %16s\n' "smokeping_prober 0.6.1" $((sp1 - sp0)) "$scpu" "$(per1k "$scpu" $((sp1 - sp0)))" "$srss" "$ssplit"
printf 'ratio lowlat/smokeping: CPU per probe %s, RSS %s\n' \
	"$(awk -v a="$(per1k "$mcpu" $((mp1 - mp0)))" -v b="$(per1k "$scpu" $((sp1 - sp0)))" 'BEGIN{printf "%.2f", a/b}')" \
	"$(awk -v a="$mrss" -v b="$srss" 'BEGIN{printf "%.2f", a/b}')"
echo "median RTT to 10.80.0.2 over the window:"
echo "  lowlat monitor:   $mmed"
echo "  smokeping_prober: $smed"
echo "  lowlat probe icmp (the window's last 10 s): p50_ms=$pmed"
echo "  (lowlat: kernel receive timestamps; smokeping_prober: read times in user space)"
fi

# --- 2. soak -------------------------------------------------------------------
[[ " $PARTS " == *" soak "* ]] || exit 0
# Every udp target holds a session (two while one hands over to the next),
# all from one address: lift the per-address cap (16 by default).
# The reflector runs from its own copy of the binary, as it would on another
# host: the kernel does not page out executable pages that two processes
# map, so a shared file would keep the monitor's unused code resident.
cp "$L" "$work/lowlat-reflector"
ip netns exec "$ns" "$work/lowlat-reflector" reflector --listen 10.80.0.2:7431 --max-sessions-per-ip 0 --quiet &
rpid=$!
pids+=("$rpid")
{
	echo "listen = \"127.0.0.1:$MPORT\""
	echo 'doctor_interval = "0s"'
	echo "journal = \"$work/journal\""
	for i in $(seq "$TARGETS"); do
		printf '[[target]]\nname = "t%d"\nkind = "udp"\naddress = "10.80.0.2:7431"\ninterval = "%s"\n' "$i" "$SOAK_INTERVAL"
	done
} >"$work/soak.toml"
sleep 1
"$L" monitor --config "$work/soak.toml" 2>"$work/monitor-soak.log" &
mpid=$!
pids+=("$mpid")
sleep 30 # warm: every target has a session, the heap its working size
c0=$(cpu_s "$mpid") r0=$(rss_kb "$mpid") n0=$(sum_metric "$MPORT" lowlat_probe_sent_total) t0=$(date +%s)
echo
echo "== soak: $TARGETS udp targets every $SOAK_INTERVAL for $SOAK =="
echo "minute  RSS KiB  anon/file  probes"
echo "     0  $r0  $(rss_split "$mpid")  $n0"
end=$((t0 + $(secs "$SOAK" | cut -d. -f1)))
minute=0
while [ "$(date +%s)" -lt "$end" ]; do
	sleep $((end - $(date +%s) < 60 ? end - $(date +%s) : 60))
	minute=$((minute + 1))
	printf '%6d  %s  %s  %s\n' "$minute" "$(rss_kb "$mpid")" "$(rss_split "$mpid")" "$(sum_metric "$MPORT" lowlat_probe_sent_total)"
done
c1=$(cpu_s "$mpid") r1=$(rss_kb "$mpid") n1=$(sum_metric "$MPORT" lowlat_probe_sent_total) t1=$(date +%s)
lost=$(sum_metric "$MPORT" lowlat_probe_lost_total)
printf 'RSS start %s KiB, end %s KiB (%+d KiB); CPU %.2f %% of one core; %d probes (%.0f/s), %d lost; CPU ms per 1k probes %s\n' \
	"$r0" "$r1" $((r1 - r0)) "$(awk -v a="$c0" -v b="$c1" -v t=$((t1 - t0)) 'BEGIN{print 100*(b-a)/t}')" $((n1 - n0)) \
	"$(awk -v n=$((n1 - n0)) -v t=$((t1 - t0)) 'BEGIN{print n/t}')" "$lost" "$(per1k "$(awk -v a="$c0" -v b="$c1" 'BEGIN{print b-a}')" $((n1 - n0)))"
