# mk/bench.mk: benchmarks and tests of the hand/ fast paths.
# Included by the top-level Makefile; every variable can be set on the make
# command line.
#
#   make bench       Go fast paths against C loops on the fake provider: the
#                    standard benchmark lines (for benchstat), then
#                    `cgo <ns>` and one `ratio <case> <go> <c> <go/c> <allocs>`
#                    line per case (thread CPU time, Go and C measured
#                    alternately, best of BENCH_COUNT runs; BENCHMARKS.md,
#                    "What is measured"). BENCH_CHECK=1 also fails on a
#                    missed target.
#   make bench-gate  make test's regression gate over every
#                    BenchmarkFast/<entry>/<n> and BenchmarkGenerated/<entry>/<n>
#                    case: fails when a case allocates, or when Go costs more
#                    than C plus its bound in empty cgo calls (the case's own
#                    cgo-ns/op) plus 1 ns per WR or completion. hand's fast
#                    paths get two cgo calls, a bound loose enough for a
#                    loaded 2-core machine and tight enough for an allocation
#                    or, at small n, an extra crossing; the generated
#                    packages' data-path stubs one, since each is one
#                    crossing with nothing for cgo to check
#                    (BENCHMARKS.md, "The regression gate"). 12-15 s of
#                    benchmarks on 2 cores (BenchmarkGenerated's nine cases
#                    about 2 of them), a few more when cases run again.
#   make test-hand   go test ./hand/..., then again built with
#                    GOEXPERIMENT=cgocheck2, which catches a Go pointer stored
#                    into C memory.

GO ?= go
BENCH_PKG ?= ./hand/
BENCH_RUN ?= .
BENCH_COUNT ?= 5
BENCH_TIME ?= 100ms
BENCH_CHECK ?=
# cgocheck2 rebuilds the runtime; its own cache keeps the default one warm.
CGOCHECK2_GOCACHE ?= $(or $(shell $(GO) env GOCACHE),$(HOME)/.cache/go-build)-cgocheck2

# The gate: BENCH_GATE_COUNT runs of BENCH_GATE_TIME per case, each case
# judged by its run where Go came closest to C (a regression adds to every
# run), then BENCH_GATE_RETRY_COUNT more of just the cases over the time
# bound.
BENCH_GATE_COUNT ?= 3
BENCH_GATE_TIME ?= 30ms
BENCH_GATE_RETRY_COUNT ?= 5
# The benchmark binary's bound (timeout(1), which sends SIGQUIT for Go's
# goroutine dump): -test.timeout does not cover benchmarks, and a fast path
# that spins would hang make test. Its exit status is checked: a crash, a
# panic or the timeout part-way fails the gate, never leaves it to judge
# the cases that ran before.
BENCH_GATE_TIMEOUT ?= 10m

.PHONY: bench bench-gate test-hand

# benchratio copies the go test output through and appends the summary; it
# exits non-zero when a benchmark failed (and, with BENCH_CHECK, on a miss).
# pipefail: it knows FAIL and panic lines, not a crash's "fatal error", so
# go test's own exit status must count too.
bench:
	@set -eo pipefail; \
	$(GO) build -o $${TMPDIR:-/tmp}/goverbs-benchratio ./hand/internal/benchratio; \
	$(GO) test -run '^$$' -bench '$(BENCH_RUN)' -benchmem -count $(BENCH_COUNT) \
		-benchtime $(BENCH_TIME) $(BENCH_PKG) 2>&1 | \
		$${TMPDIR:-/tmp}/goverbs-benchratio $(if $(BENCH_CHECK),-check)

# The test binary is built once and run from hand/ (as go test runs it), in
# a temporary directory that is kept, with the runs' output, when the gate
# fails, and removed when it passes.
# benchratio -gate exits 1 on an allocation, a failed run or a line without
# allocs/op: the gate fails at once. It exits 2 when cases are only over the
# time bound, after writing a -bench pattern selecting just them: on a
# shared machine one slow slice can push a case over, so those cases run
# again and the gate takes, per case, the run of all with the smallest
# go-c (each run measures both sides together; a regression adds to Go in
# every run); only a case still over the bound then fails it. A failure
# names the CPU and kernel it ran on: a CI machine may not be the kind a
# change was measured on.
#
# The proof that it fails (2026-11-23, 2 cores): GOVERBS_BENCH_INJECT=alloc
# make bench-gate fails in 10 s, every one of the 66 cases "1 allocs/op > 0"
# (TestGateCatchesInjectedAlloc in hand/internal/benchratio asserts it on two
# cases); =crossing (one more empty cgo call per op, 22-24 ns) fails too,
# but only at n = 1 and narrowly: go-c 45-50 ns against bounds of 44-49 ns,
# 13 cases still over by 0.6-3 ns after the retry; at n >= 8 one extra
# crossing per call stays inside the bound.
bench-gate:
	@set -e; mkdir -p "$${TMPDIR:-/tmp}"; tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/goverbs-bench-gate.XXXXXX"); \
	$(GO) build -o $$tmp/benchratio ./hand/internal/benchratio; \
	$(GO) test -c -o $$tmp/hand.test $(BENCH_PKG); \
	start=$$(date +%s); \
	bench() { (cd $(BENCH_PKG) && timeout -s QUIT -k 10s $(BENCH_GATE_TIMEOUT) $$tmp/hand.test -test.run '^$$' -test.bench "$$1" \
		-test.benchmem -test.count "$$2" -test.benchtime $(BENCH_GATE_TIME)) >"$$3" 2>&1 || { \
		st=$$?; tail -20 "$$3" >&2; \
		echo "bench-gate: FAILED: the benchmark binary exited $$st (a crash, a panic or its timeout): no verdict on what it did not run; output in $$3" >&2; \
		exit 1; }; }; \
	bench '^BenchmarkCgoEmpty$$|^BenchmarkFast$$|^BenchmarkGenerated$$' $(BENCH_GATE_COUNT) $$tmp/run.txt; \
	rc=0; $$tmp/benchratio -gate -brief -retry $$tmp/retry.txt <$$tmp/run.txt || rc=$$?; \
	if [ $$rc = 2 ]; then \
		echo "bench-gate: running the cases over the bound again ($(BENCH_GATE_RETRY_COUNT) x $(BENCH_GATE_TIME))"; \
		bench "$$(cat $$tmp/retry.txt)" $(BENCH_GATE_RETRY_COUNT) $$tmp/rerun.txt; \
		rc=0; cat $$tmp/run.txt $$tmp/rerun.txt | $$tmp/benchratio -gate >/dev/null || rc=$$?; \
	fi; \
	if [ $$rc != 0 ]; then \
		echo "bench-gate: $$(( $$(date +%s) - start )) s of benchmarks; output in $$tmp"; \
		echo "bench-gate: on $$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | sort | uniq -c | tr -s ' ' | sed 's/^ //') (family $$(sed -n 's/^cpu family[^:]*: *//p' /proc/cpuinfo | head -1), model $$(sed -n 's/^model[^:]*: *//p' /proc/cpuinfo | head -1)), kernel $$(uname -r)" >&2; \
		echo "bench-gate: FAILED: a case allocates or costs more than its bound (BenchmarkFast: C + 2 cgo calls + 1 ns/WR; BenchmarkGenerated: C + 1.5 empty calls of the stub's shape + 1 ns/WR); the benchratio lines above name each case and the bound it broke" >&2; exit 1; \
	fi; \
	rm -rf "$$tmp"; \
	echo "bench-gate: $$(( $$(date +%s) - start )) s of benchmarks"

test-hand:
	$(GO) test ./hand/...
	GOEXPERIMENT=cgocheck2 GOCACHE=$(CGOCHECK2_GOCACHE) $(GO) test -count=1 ./hand/...
