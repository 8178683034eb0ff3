#!/usr/bin/env bash
# Runs every lab scenario where it can run and prints the before/after
# figures: on this host's kernel (as root) the ones it can do, and all of
# them in the stock-kernel VM (qemu, TCG), RUNS times each. Results go to
# $OUT (JSON per run, one HTML page for all), figures to stdout: per
# expectation every run's figure, the median and its margin to the threshold
# (bench/lab/summary.py). Expectations that miss are reported, not failures
# of this script.
#
#   sudo bash bench/lab/run.sh                 # host + VM, 3 runs each
#   HOST=0 RUNS=1 bash bench/lab/run.sh        # VM only, once
#   SCENARIOS="first-frame" bash bench/lab/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/lab/out}
HOST=${HOST:-1}
VM=${VM:-1}
RUNS=${RUNS:-3}
SCENARIOS=${SCENARIOS:-"nagle-small-messages bufferbloat-uplink first-frame game-egress cross-border-jitter"}
mkdir -p "$OUT"
export CGO_ENABLED=0
go build -trimpath -o "$OUT/lowlat" ./cmd/lowlat || exit 1
bin=$OUT/lowlat

run() { # where scenario n
	local where=$1 s=$2 n=$3 t0 t1 rc f
	f="$OUT/$s.$where.$n"
	t0=$(date +%s.%N)
	if [ "$where" = host ]; then
		"$bin" lab run "$s" --quiet -o "$f.json" > "$f.txt" 2> "$f.err"
	else
		"$bin" lab vm "$s" --quiet -o "$f.json" > "$f.txt" 2> "$f.err"
	fi
	rc=$?
	t1=$(date +%s.%N)
	local last
	last=$(tail -1 "$f.txt" 2>/dev/null)
	[ -n "$last" ] || last=$(tail -1 "$f.err" 2>/dev/null)
	printf '%-22s %-4s #%d exit %d  %6.1f s wall, load %s  %s\n' "$s" "$where" "$n" "$rc" "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$last"
}

echo "== wall time, machine load (1, 5, 15 min) and verdict per run"
for n in $(seq 1 "$RUNS"); do
	if [ "$HOST" = 1 ]; then
		for s in $SCENARIOS; do run host "$s" "$n"; done
	fi
	if [ "$VM" = 1 ]; then
		for s in $SCENARIOS; do run vm "$s" "$n"; done
	fi
done
echo
echo "== before/after (every expectation and key metric)"
for f in "$OUT"/*.txt; do
	[ -s "$f" ] || continue
	echo "-- $(basename "$f" .txt)"
	sed -n '/^SCENARIO/,/^$/p' "$f"
done
jsons=$(ls "$OUT"/*.json 2>/dev/null)
if [ -n "$jsons" ]; then
	echo
	echo "== per expectation: median of the runs and its margin to the threshold"
	python3 bench/lab/summary.py $jsons
	"$bin" lab report $jsons --html "$OUT/lab.html" > /dev/null
	echo "HTML report: $OUT/lab.html"
fi
