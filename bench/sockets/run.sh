#!/usr/bin/env bash
# Benchmarks 'lowlat sockets' against 'ss -tinp' on the same socket
# population, side by side: N connections held by one process inside a
# throwaway network namespace (2N established sockets, plus the listener),
# each tool run ROUNDS times alternately; medians of wall time and of peak
# RSS (GNU time), and the ratio lowlat/ss. Also the inet_diag dump alone,
# lowlat's own NETLINK_SOCK_DIAG reader vs vishvananda/netlink's
# SocketDiagTCPInfo (go test -bench).
#
#   bash bench/sockets/run.sh                 # 10,000 established sockets
#   CONNS=10000 ROUNDS=9 bash bench/sockets/run.sh
#
# Needs root (network namespace, reading every process's descriptors),
# iproute2 (ip, ss) and GNU time. Traffic stays on the namespace's loopback;
# the namespace and every process started here are removed on exit.
set -euo pipefail

CONNS=${CONNS:-5000}   # connections: 2*CONNS established sockets
ROUNDS=${ROUNDS:-7}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
ns=lowlat-bench-sockets-$$
holdpid=
cleanup() {
	[ -n "$holdpid" ] && kill "$holdpid" 2>/dev/null || true
	exec 3>&- 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "run as root (network namespace, other processes' descriptors)" >&2; exit 1; }
command -v ss >/dev/null && command -v ip >/dev/null || { echo "needs iproute2 (ip, ss)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }

cd "$root"
CGO_ENABLED=0 go build -trimpath -o "$work/lowlat" ./cmd/lowlat
CGO_ENABLED=0 go build -trimpath -o "$work/hold" ./bench/sockets/hold

ip netns add "$ns"
ip -n "$ns" link set lo up
mkfifo "$work/in"
ip netns exec "$ns" "$work/hold" -n "$CONNS" <"$work/in" >"$work/hold.out" &
holdpid=$!
exec 3>"$work/in"
for _ in $(seq 1 600); do grep -q ready "$work/hold.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$work/hold.out" || { echo "hold did not get ready" >&2; exit 1; }
echo "population: $(cat "$work/hold.out") sockets held by pid $holdpid (namespace $ns), $(nproc) CPUs, kernel $(uname -r)"

# run NAME CMD...: one timed run; appends "wall_s rss_kb" to $work/NAME.
run() {
	local name=$1; shift
	/usr/bin/time -f "%e %M" -o "$work/t" ip netns exec "$ns" "$@" >"$work/$name.last" 2>/dev/null
	cat "$work/t" >>"$work/$name"
}
for r in $(seq 1 "$ROUNDS"); do
	run lowlat_json "$work/lowlat" sockets --json
	run ss ss -tinp
	run lowlat_text "$work/lowlat" sockets
	run lowlat_noopt "$work/lowlat" sockets --no-options --json
	run ss_a ss -tinpa
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v c="$2" '{print $c}' "$work/$1" | median; }
rows=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["sockets"]))' "$work/lowlat_json.last")
ssrows=$(grep -c '^ESTAB' "$work/ss.last" || true)
withopts=$(python3 -c 'import json,sys; print(sum(1 for s in json.load(open(sys.argv[1]))["sockets"] if s["options"]))' "$work/lowlat_json.last")
printf '\n%-44s %10s %12s\n' "tool (median of $ROUNDS)" "wall s" "max RSS MB"
for n in lowlat_json lowlat_text lowlat_noopt ss ss_a; do
	case $n in
	lowlat_json) label="lowlat sockets --json";;
	lowlat_text) label="lowlat sockets (table)";;
	lowlat_noopt) label="lowlat sockets --no-options --json";;
	ss) label="ss -tinp";;
	ss_a) label="ss -tinpa";;
	esac
	printf '%-44s %10.3f %12.1f\n' "$label" "$(col $n 1)" "$(awk "BEGIN{print $(col $n 2)/1024}")"
done
printf '\nrows: lowlat %s (%s with options read), ss %s established\n' "$rows" "$withopts" "$ssrows"
awk -v a="$(col lowlat_json 1)" -v b="$(col ss 1)" -v c="$(col lowlat_json 2)" -v d="$(col ss 2)" \
	'BEGIN { printf "ratio lowlat --json / ss -tinp: wall %.2fx, RSS %.2fx\n", a/b, c/d }'

echo
echo "inet_diag dump alone (Go benchmark, $((2 * CONNS)) sockets):"
LOWLAT_BENCH_CONNS=$CONNS go test -run '^$' -bench 'BenchmarkDiagDump' -benchmem -benchtime 20x ./internal/sockets | grep -E '^Benchmark'
