#!/usr/bin/env bash
# Runs lowlat autorate beside the oracle and its peer, cake-autorate, on the
# lab's capped-uplink-varying path (a provider cap stepping 2 → 1 → 3 → 2
# Mbit/s every 30 s, a 5 s buffer, 4 upload flows), and prints each variant's
# figures side by side, each run's autorate set against the oracle of the
# same run (docs/autorate.md, "Where it stands").
#
#   sudo bash bench/autorate/run.sh                 # the VM (cake), full length, three runs (~45 minutes)
#   sudo KERNEL=host bash bench/autorate/run.sh     # this host's kernel (the tbf fallback; no cake-autorate)
#   RUNS=1 SCALE=0.5 bash bench/autorate/run.sh
#   CAKE_AUTORATE=~/src/cake-autorate bash bench/autorate/run.sh
#
# Variants: the oracle (the static shaper moved to 90 % of each new cap the
# instant it steps) and autorate with a reflector, each with and without the
# MSS clamp (clamp-mss=auto); autorate on the passive signal alone with
# PASSIVE=1; and in the VM cake-autorate.
#
# cake-autorate (GPL-2.0) is not lowlat's to ship: it is fetched from GitHub at
# the commit below into $OUT unless CAKE_AUTORATE names a checkout. It runs with
# bash and fping (apt-get install fping), at lowlat's probe budget (one echo
# every 50 ms to the lab's server), with its defaults (30 ms over the baseline
# of half the RTT).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/autorate/out}
RUNS=${RUNS:-3}
KERNEL=${KERNEL:-vm}
SCALE=${SCALE:-1}
REPO=https://github.com/lynxthecat/cake-autorate
COMMIT=${CAKE_AUTORATE_COMMIT:-94238bef6184ffde3c5e44d4f72784a140849571}
mkdir -p "$OUT"
export CGO_ENABLED=0
go build -trimpath -o "$OUT/lowlat" ./cmd/lowlat || exit 1

if [ "$KERNEL" = vm ]; then
	dir=${CAKE_AUTORATE:-}
	if [ -z "$dir" ]; then
		dir=$OUT/cake-autorate
		if [ ! -f "$dir/cake-autorate.sh" ]; then
			rm -rf "$dir.git" "$dir"
			git init -q "$dir.git" &&
				git -C "$dir.git" fetch -q --depth 1 "$REPO" "$COMMIT" &&
				mkdir -p "$dir" &&
				git -C "$dir.git" archive FETCH_HEAD | tar -x -C "$dir" || {
				echo "bench/autorate: could not fetch cake-autorate $COMMIT from $REPO (or set CAKE_AUTORATE=DIR)" >&2
				exit 1
			}
			rm -rf "$dir.git"
		fi
	fi
	command -v fping > /dev/null || { echo "bench/autorate: cake-autorate needs fping (apt-get install fping)" >&2; exit 1; }
fi

variants=(--variant capped-uplink-oracle --variant capped-uplink-oracle-mss
	--variant autorate-reflector --variant autorate-reflector-mss)
# The passive signal alone only when asked (PASSIVE=1): two more minutes a run.
[ -n "${PASSIVE:-}" ] && variants+=(--variant autorate-passive)
cmd=(run)
if [ "$KERNEL" = vm ]; then
	cmd=(vm --timeout 60m --cake-autorate "$dir")
	variants+=(--variant cake-autorate)
fi
for n in $(seq 1 "$RUNS"); do
	f=$OUT/capped-uplink-varying.$KERNEL.$n
	"$OUT/lowlat" lab "${cmd[0]}" capped-uplink-varying --quiet --scale "$SCALE" "${cmd[@]:1}" \
		"${variants[@]}" -o "$f.json" > "$f.txt" 2> "$f.err"
	echo "run $n ($KERNEL): exit $? ($(tail -1 "$f.txt" 2>/dev/null || tail -1 "$f.err"))"
done
python3 bench/autorate/table.py "$OUT"/capped-uplink-varying.$KERNEL.*.json
