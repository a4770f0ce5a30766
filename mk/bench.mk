# mk/bench.mk: benchmarks and tests of the hand/ fast paths.
# Included by the top-level Makefile; every variable can be set on the make
# command line.
#
#   make bench       Go fast paths against C loops on the fake provider: the
#                    standard benchmark lines (for benchstat), then
#                    `cgo <ns>` and one `ratio <case> <go> <c> <go/c> <allocs>`
#                    line per case (process CPU time, Go and C measured
#                    alternately, best of BENCH_COUNT runs; see
#                    BENCHMARKS.md). BENCH_CHECK=1 also fails on a
#                    missed target.
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

.PHONY: bench test-hand

# benchratio copies the go test output through and appends the summary; it
# exits non-zero when a benchmark failed (and, with BENCH_CHECK, on a miss).
bench:
	@$(GO) build -o $${TMPDIR:-/tmp}/goverbs-benchratio ./hand/internal/benchratio
	@$(GO) test -run '^$$' -bench '$(BENCH_RUN)' -benchmem -count $(BENCH_COUNT) \
		-benchtime $(BENCH_TIME) $(BENCH_PKG) 2>&1 | \
		$${TMPDIR:-/tmp}/goverbs-benchratio $(if $(BENCH_CHECK),-check)

test-hand:
	$(GO) test ./hand/...
	GOEXPERIMENT=cgocheck2 GOCACHE=$(CGOCHECK2_GOCACHE) $(GO) test -count=1 ./hand/...
