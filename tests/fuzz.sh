#!/usr/bin/env bash
# tests/fuzz.sh PKG TARGET FUZZTIME: make fuzz's run of one fuzz target,
# go test PKG -run '^$' -fuzz '^TARGET$' -fuzztime FUZZTIME
# -fuzzminimizetime 50x. Go minimizes each new interesting input for up to
# 60 s by default, which a 20 s run spends whole on the first one
# (FuzzLoad: about 31 inputs in 20 s, none new; with 50x, 3,500 and
# counting): a bounded minimization leaves the time to fuzz.
#
# Go 1.26's fuzzing coordinator can fail a run that found nothing with a
# bare "context deadline exceeded" just as -fuzztime ends: a race between the
# deadline's context and its child (golang/go#75804, fixed in Go 1.27). A
# run that fails that way, and wrote no failing input, runs once more; any
# other failure, or the same one twice, fails make fuzz, as does a run that
# fuzzed nothing.
set -u
pkg=$1 target=$2 fuzztime=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT

run() {
	${GO:-go} test "$pkg" -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x 2>&1 | tee "$out"
	return "${PIPESTATUS[0]}"
}

# fuzzed: a run that passed must have fuzzed: go test passes with "no fuzz
# tests to fuzz" when no target matches (one renamed, or a name mistyped),
# while the fuzzing coordinator, once started, prints "fuzz: elapsed:".
fuzzed() {
	grep -q '^fuzz: elapsed: ' "$out" && return 0
	echo "fuzz.sh: nothing was fuzzed: $pkg has no fuzz target $target" >&2
	return 1
}

run && { fuzzed; exit; }
rc=$?
if grep -qx '    context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
	echo "fuzz.sh: $target stopped on Go's fuzztime race (golang/go#75804) with no failing input; running it once more"
	run && { fuzzed; exit; }
	rc=$?
fi
exit "$rc"
