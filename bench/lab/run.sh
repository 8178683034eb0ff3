#!/usr/bin/env bash
# Runs every lab scenario where it can run and prints the before/after
# figures: on this host's kernel (as root) the ones it can do, and all of
# them in the stock-kernel VM (qemu, TCG). Results go to $OUT (JSON per run,
# one HTML page for all), figures to stdout. Expectations that miss are
# reported, not failures of this script.
#
#   sudo bash bench/lab/run.sh                 # host + VM
#   HOST=0 bash bench/lab/run.sh               # VM only
#   SCENARIOS="first-frame" bash bench/lab/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/lab/out}
HOST=${HOST:-1}
VM=${VM:-1}
SCENARIOS=${SCENARIOS:-"nagle-small-messages bufferbloat-uplink first-frame game-egress cross-border-jitter"}
mkdir -p "$OUT"
export CGO_ENABLED=0
go build -trimpath -o "$OUT/lowlat" ./cmd/lowlat || exit 1
bin=$OUT/lowlat

run() { # where scenario
	local where=$1 s=$2 t0 t1 rc
	t0=$(date +%s.%N)
	if [ "$where" = host ]; then
		"$bin" lab run "$s" --quiet -o "$OUT/$s.$where.json" > "$OUT/$s.$where.txt" 2> "$OUT/$s.$where.err"
	else
		"$bin" lab vm "$s" --quiet -o "$OUT/$s.$where.json" > "$OUT/$s.$where.txt" 2> "$OUT/$s.$where.err"
	fi
	rc=$?
	t1=$(date +%s.%N)
	local last
	last=$(tail -1 "$OUT/$s.$where.txt" 2>/dev/null)
	[ -n "$last" ] || last=$(tail -1 "$OUT/$s.$where.err" 2>/dev/null)
	printf '%-22s %-4s exit %d  %6.1f s wall  %s\n' "$s" "$where" "$rc" "$(echo "$t1 - $t0" | bc)" "$last"
}

echo "== wall time and verdict per run"
if [ "$HOST" = 1 ]; then
	for s in $SCENARIOS; do run host "$s"; done
fi
if [ "$VM" = 1 ]; then
	for s in $SCENARIOS; do run vm "$s"; done
fi
echo
echo "== before/after (every expectation and key metric)"
for f in "$OUT"/*.txt; do
	[ -s "$f" ] || continue
	echo "-- $(basename "$f" .txt)"
	sed -n '/^SCENARIO/,/^$/p' "$f"
done
jsons=$(ls "$OUT"/*.json 2>/dev/null)
if [ -n "$jsons" ]; then
	"$bin" lab report $jsons --html "$OUT/lab.html" > /dev/null
	echo "HTML report: $OUT/lab.html"
fi
