#!/usr/bin/env bash
# Foundation benchmarks (issue 2): wall time of 'lowlat doctor' on this host and
# of 'lowlat plan' on a synthetic 256-CPU / 4-node / 64-queue capture, as
# medians over N runs of the built binary (process start included), next to
# the goals (300 ms and 1 s). Also tuned's 'tuned-adm verify' when installed,
# the closest peer operation, side by side.
#
#   bash bench/foundation/run.sh        # N=21 runs each
set -euo pipefail
N=${N:-21}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$root"
CGO_ENABLED=0 go build -o "$work/lowlat" ./cmd/lowlat
go run ./bench/foundation/gen256 "$work/synth256.json"

. "$root/bench/lib.sh"

doctor=$(median_ms "$N" "$work/lowlat" doctor)
doctor_nosample=$(median_ms "$N" "$work/lowlat" doctor --sample 0)
doctor_json=$(median_ms "$N" "$work/lowlat" doctor --json)
plan256=$(median_ms "$N" "$work/lowlat" plan --profile game-udp --from "$work/synth256.json")
plan256c=$(median_ms "$N" "$work/lowlat" plan --profile capped-uplink --set rate=10gbit --from "$work/synth256.json" --json)
doctor256=$(median_ms "$N" "$work/lowlat" doctor --from "$work/synth256.json")
# The corpus of real captured trees (internal/host/testdata/corpus): each
# command within 250 ms.
corpus_rows=()
for tree in "$root"/internal/host/testdata/corpus/*/; do
	name=$(basename "$tree")
	corpus_rows+=("doctor --root corpus/$name|$(median_ms "$N" "$work/lowlat" doctor --root "$tree")")
	corpus_rows+=("plan game-udp --root corpus/$name|$(median_ms "$N" "$work/lowlat" plan --profile game-udp --root "$tree")")
	corpus_rows+=("capture --root corpus/$name -o FILE|$(median_ms "$N" "$work/lowlat" capture --root "$tree" -o "$work/corpus.json")")
	corpus_rows+=("capture --root corpus/$name --tree DIR (new DIR each run)|$(median_ms "$N" sh -c 'd=$(mktemp -d -u "$0/tree.XXXXXX"); "$1" capture --root "$2" --tree "$d"' "$work" "$work/lowlat" "$tree")")
done
rss=$( { /usr/bin/time -f '%M' "$work/lowlat" plan --profile game-udp --from "$work/synth256.json" >/dev/null; } 2>&1 | tail -1 || echo "?")

printf '\n%-60s %10s %10s %8s\n' "benchmark (median of $N runs)" "ms" "goal ms" "ratio"
row "doctor on this host (200 ms NIC sampling window)" "$doctor" 300
row "doctor --sample 0 on this host" "$doctor_nosample" 300
row "doctor --json on this host" "$doctor_json" 300
row "plan game-udp, synthetic 256 CPU / 64 queues" "$plan256" 1000
row "plan capped-uplink --json, synthetic 256" "$plan256c" 1000
row "doctor --from synthetic 256" "$doctor256" 1000
for r in "${corpus_rows[@]}"; do
	row "${r%%|*}" "${r##*|}" 250
done
echo "max RSS of plan on the 256-CPU capture: ${rss} KB"
if command -v tuned-adm >/dev/null && pgrep -x tuned >/dev/null; then
	tv=$(median_ms "$N" tuned-adm verify)
	row "peer: tuned-adm verify (tuned running)" "$tv" 300
else
	echo "(tuned not running here: no peer row; tuned needs its daemon and D-Bus)"
fi
