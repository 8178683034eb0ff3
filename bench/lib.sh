# Shared helpers for the benchmark scripts (source it; bash).

# median_ms RUNS CMD...: runs CMD RUNS times (output discarded), prints the
# median wall time in ms, process start included.
median_ms() {
	local runs=$1
	shift
	local times=()
	for _ in $(seq "$runs"); do
		local t0 t1
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1 || { echo "command failed: $*" >&2; return 1; }
		t1=$(date +%s%N)
		times+=($(((t1 - t0) / 1000)))
	done
	printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

# row LABEL MS GOAL_MS: one line of a "benchmark / ms / goal / ratio" table.
row() {
	printf '%-60s %10s %10s %8s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN{printf "%.3f", a/b}')"
}
