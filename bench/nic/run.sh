#!/usr/bin/env bash
# NIC/IRQ benchmarks (issue 5), medians over N runs of the built binary
# (process start and fact gathering included), next to the goals:
#   - 'lowlat plan' with the NIC/IRQ rows on the synthetic 256-CPU / 4-node /
#     64-queue mlx5 host (a capture written by bench/foundation/gen256): < 100 ms
#   - 'lowlat doctor' on this host including the drop-counter sampling window
#     (1 s by default, two ethtool -S reads and two /proc task scans): < 1.5 s
# plus, for reference, the in-process cost of the planner alone (go test
# -bench), doctor with its default 200 ms window, with a 1 s window, and with
# sampling off (--sample 0).
#
#   bash bench/nic/run.sh          # N=11 (doctor: N=5, each run takes ~1 s)
set -euo pipefail
N=${N:-11}
ND=${ND:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$root"
CGO_ENABLED=0 go build -o "$work/lowlat" ./cmd/lowlat
go run ./bench/foundation/gen256 "$work/synth256.json"

. "$root/bench/lib.sh"

rows=$("$work/lowlat" plan --profile game-udp --from "$work/synth256.json" --json | grep -c '"knob"')
plan=$(median_ms "$N" "$work/lowlat" plan --profile game-udp --from "$work/synth256.json")
planj=$(median_ms "$N" "$work/lowlat" plan --profile realtime-tcp --from "$work/synth256.json" --json)
planr=$(median_ms "$N" "$work/lowlat" plan --profile game-udp --reserve-cpus 64-71 --from "$work/synth256.json")
doctor=$(median_ms "$ND" "$work/lowlat" doctor)
doctor1s=$(median_ms "$ND" "$work/lowlat" doctor --sample 1s)
doctor0=$(median_ms "$N" "$work/lowlat" doctor --sample 0)
doctor256=$(median_ms "$N" "$work/lowlat" doctor --from "$work/synth256.json")

printf '\n%-60s %10s %10s %8s\n' "benchmark (median of $N runs; doctor: $ND)" "ms" "goal ms" "ratio"
row "plan game-udp, synthetic 256 CPU ($rows rows)" "$plan" 100
row "plan realtime-tcp --json, synthetic 256" "$planj" 100
row "plan game-udp --reserve-cpus 64-71, synthetic 256" "$planr" 100
row "doctor on this host, default 200 ms sampling window" "$doctor" 1500
row "doctor --sample 1s on this host" "$doctor1s" 1500
row "doctor on this host, sampling off" "$doctor0" 1500
row "doctor --from synthetic 256 (a capture: not sampled)" "$doctor256" 1500

echo
echo "in-process (no process start, no gathering):"
go test ./internal/irqplan -run '^$' -bench 'BenchmarkMake256$' -benchtime 50x | grep Benchmark
go test ./internal/plan -run '^$' -bench 'BenchmarkPlan256$' -benchtime 50x | grep Benchmark
