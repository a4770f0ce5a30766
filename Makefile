# goverbs: see README.md and docs/testing.md. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

include mk/headers.mk
include mk/bench.mk
include mk/rxe.mk
include mk/demo.mk
include mk/arm64.mk

FUZZTIME ?= 20s
FUZZTIME_WIRE ?= 5s

.PHONY: all deps generate check-generated generate-offline vet test-go-min test test-go test-versions fuzz clean

# One recipe at a time, even under make -j: make test's prerequisites are
# ordered only by their place in the list (deps installs the compilers that
# generate needs; the timing gates and the VMs need the two cores to
# themselves), so -j would run them at once.
.NOTPARALLEL:

all: generate

# Debian packages for the build and the tests, installed only when missing.
deps:
	@bash tests/deps.sh

# Deterministic: regenerates generated/ and tests/layout from
# the vendored 65.0 headers (headers/vendored) and gen/since.tsv (the
# first pinned release of each function, for its error: make since; built
# into verbsgen, -since-pinned), both committed; no fetched tree is read.
# go run downloads verbsgen's module dependencies on first use; after that
# it needs no network (generate-offline proves it).
# Laid out for linux/amd64 and linux/arm64: it needs x86_64-linux-gnu-gcc
# and aarch64-linux-gnu-gcc with their C libraries' headers (make deps).
generate:
	cd generated && $(GO) generate .

# Fails if the committed generated files differ from what the generator
# makes, the vendored headers from the pinned packages, or gen/since.tsv
# from the pinned trees (check-since); and if git cannot
# tell (not a repository, a clone owned by another user), where its empty
# output would read as no difference.
check-generated: generate check-vendored check-since
	@st=$$(git status --porcelain -- generated tests/layout) || { \
		echo "check-generated: git status failed: cannot tell whether generated/ matches the generator's output" >&2; exit 1; }; \
	if [ -n "$$st" ]; then \
		git status --short -- generated tests/layout; git diff --stat -- generated tests/layout; \
		echo "check-generated: generated files differ from the generator's output: run make generate and commit" >&2; exit 1; \
	fi
	@echo "check-generated: generated/ and tests/layout match the generator's output"

# make generate with no network and the fetched header trees hidden (an
# empty tmpfs over each headers/rdma-core-*), in a network and mount
# namespace of its own: it fails if generating reads a fetched tree or
# downloads anything, and if it leaves generated/ or tests/layout other
# than committed. It first checks that the namespace has no interface but
# its loopback, so that nothing can be reached.
generate-offline:
	unshare --net --mount --map-root-user bash -c '\
		set -e; \
		if [ -n "$$(awk -F: '"'"'NR > 2 && $$1 !~ /^ *lo$$/'"'"' /proc/net/dev)" ]; then echo "generate-offline: the namespace has an interface besides lo: it may reach a network" >&2; exit 1; fi; \
		for d in headers/rdma-core-*/; do [ -d "$$d" ] && mount -t tmpfs -o ro tmpfs "$$d"; done; \
		GOPROXY=off $(MAKE) --no-print-directory generate'
	@st=$$(git status --porcelain -- generated tests/layout) || { \
		echo "generate-offline: git status failed" >&2; exit 1; }; \
	if [ -n "$$st" ]; then \
		git status --short -- generated tests/layout; \
		echo "generate-offline: make generate without network or fetched trees left generated files that differ from the committed ones" >&2; exit 1; \
	fi
	@echo "generate-offline: make generate needs no network and no fetched tree, and leaves no diff"

# gofmt over the tracked Go files, go vet and staticcheck (a tool
# dependency in go.mod: go tool staticcheck).
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')) || exit 1; \
	if [ -n "$$unformatted" ]; then echo "vet: not gofmt-formatted (run gofmt -w):" $$unformatted >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# Builds and vets everything with the oldest Go that go.mod's go line
# admits (go 1.25.0, the floor of modernc.org/cc/v4): the go command fetches
# that toolchain through the module proxy the first time.
GO_MIN ?= go1.25.14
test-go-min:
	GOTOOLCHAIN=$(GO_MIN) $(GO) build ./...
	GOTOOLCHAIN=$(GO_MIN) $(GO) vet ./...

# Unit, golden and layout tests (the vendored 65.0) on the host. The tests that need the
# pinned header trees skip without them, unless CI is set: here it is, and
# the trees come first, so that a missing one fails and never passes as a
# skip that go test's summary does not show.
# tests/ownheaders leaves the test binary of its scratch module (goverbs'
# hand/ beside a package generated from a user's own headers) in
# SITE_TEST_OUT, for rxe-test to run in the VM.
SITE_TEST_OUT ?= $(CURDIR)/.cache/site
test-go: headers
	CI=1 GOVERBS_SITE_TEST_OUT=$(SITE_TEST_OUT) $(GO) test -count=1 ./...

# Layouts generated from the 56.1 headers, checked against gcc with those
# headers, and what changed since 44.0.
test-versions: headers
	$(GO) test -count=1 -v -run '.' ./tests/versions/

# Bounded runs of the fuzz targets, about 125 s in all (FUZZTIME each for
# the generator's two, FUZZTIME_WIRE for the decoders of peer input):
#   FuzzLoad      headers through cc/v4 and every stage: no panic, no hang
#   FuzzEmit      the stages after cc/v4 on mutated IR: gofmt-clean Go that
#                 type-checks, layouts equal to cc/v4's
#   FuzzEndpoint  hand.Endpoint from a peer's bytes
#   FuzzRemoteBuffer  hand.RemoteBuffer from a peer's bytes, and its slices
#   FuzzAdvert    goverbs-rping's buffer advertisements, and the RDMA read
#                 and write built from them
#   FuzzPeer      goverbs-perf's side-channel address (endpoint and buffer)
#   FuzzParse     pingaddr: a ping-pong tool's address line from a peer
#   FuzzReadSRQ   pingaddr: ibv_srq_pingpong's 256-line exchange
# tests/fuzz.sh runs each; it reruns once a run that Go 1.26's coordinator
# failed with a bare "context deadline exceeded" and no failing input
# (golang/go#75804).
fuzz: headers
	GO=$(GO) tests/fuzz.sh ./gen FuzzLoad $(FUZZTIME)
	GO=$(GO) tests/fuzz.sh ./gen FuzzEmit $(FUZZTIME)
	GO=$(GO) tests/fuzz.sh ./hand FuzzEndpoint $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./hand FuzzRemoteBuffer $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./internal/rping FuzzAdvert $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./internal/perf FuzzPeer $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./internal/pingaddr FuzzParse $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./internal/pingaddr FuzzReadSRQ $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./rsocket/internal/wire FuzzConnData $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./rsocket/internal/wire FuzzImm $(FUZZTIME_WIRE)
	GO=$(GO) tests/fuzz.sh ./rsocket/internal/wire FuzzSGE $(FUZZTIME_WIRE)

# The releases whose rdma-core make test runs tests/rxe against besides the
# host's (make test RXE_MATRIX_RELEASES='...' picks others): the oldest
# pinned (bullseye, 33.2), Debian 13's (56.1) and unstable's (65.0), and
# on an emulated arm64 machine the host's release (44.0) and Debian 13's
# (56.1, with its 6.12 kernel). bookworm is the host's, which rxe-test runs.
test: RXE_MATRIX_RELEASES = bullseye trixie sid bookworm-arm64 trixie-arm64
test: RXE_PREBUILT = $(SITE_TEST_OUT)/sitecheck.test
test: deps headers check-generated generate-offline vet test-go-min test-go test-hand bench-gate test-arm64 nordma-build fuzz rxe-test soak rxe-pair-test rxe-matrix rxe-pair-test-arm64
	@echo "make test: all suites passed"

clean:
	rm -rf bin
