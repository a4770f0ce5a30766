# mk/arm64.mk: the linux/arm64 build, checked on an amd64 machine.
# Included by the top-level Makefile; every variable can be set on the make
# command line.
#
#   make test-arm64  cross-builds and vets every package for linux/arm64 with
#                    Debian's aarch64-linux-gnu-gcc (the cgo preambles'
#                    layout assertions compile against arm64's glibc there),
#                    then runs the layout test (gcc's sizeof, _Alignof and
#                    offsetof against the Go types) under qemu-aarch64 user
#                    emulation; then the tests that load libibverbs, which
#                    the cross sysroot lacks (the generated packages'; hand/'s
#                    on its fake provider: chains, dispatch, zero
#                    allocations; the loader, the tools' own), with
#                    the bookworm-arm64 guest root (rxevm -setup-root) as
#                    qemu's library path: Debian 12's arm64 rdma-core 44.0.
#                    make deps installs the cross compiler and qemu.

GO ?= go
ARM64_CC ?= aarch64-linux-gnu-gcc
ARM64_SYSROOT ?= /usr/aarch64-linux-gnu
ARM64_QEMU ?= qemu-aarch64-static
ARM64_TESTS ?= ./tests/layout/
# Not hand/internal/benchratio: the gate's tool runs go test on the host.
# The generated packages' tests load libibverbs and librdmacm (their helpers,
# the no-RDMA errors), so they run on the guest root too.
ARM64_ROOT_TESTS ?= ./generated/... ./hand/ ./hand/internal/cbench ./libload ./verberr ./internal/pingaddr ./internal/getopt \
	./internal/devinfo ./internal/perf/... ./internal/pingpong \
	./internal/rping ./tests/internal/testkit
ARM64_ROOT ?= bookworm-arm64
# TestGuideSnippets runs docs/generated.md's program with go run, which
# builds for GOARCH=arm64 and cannot exec that under user emulation; the
# host's make test-go runs it, and vets the same snippets.
ARM64_SKIP ?= ^TestGuideSnippets$$
ARM64_ENV = GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$(ARM64_CC)

.PHONY: test-arm64

test-arm64:
	@command -v $(ARM64_CC) >/dev/null || { echo "test-arm64: $(ARM64_CC) not found (make deps)" >&2; exit 1; }
	@command -v $(ARM64_QEMU) >/dev/null || { echo "test-arm64: $(ARM64_QEMU) not found (make deps)" >&2; exit 1; }
	$(ARM64_ENV) $(GO) build ./...
	$(ARM64_ENV) $(GO) vet ./...
	$(ARM64_ENV) $(GO) test -count=1 -exec '$(ARM64_QEMU) -L $(ARM64_SYSROOT)' $(ARM64_TESTS)
	@set -e; root=$$($(GO) run ./internal/cmd/rxevm $(RXEVM_FLAGS) -setup-root $(ARM64_ROOT)); \
	echo "test-arm64: tests that load libibverbs, on $(ARM64_ROOT)'s arm64 libraries ($$root)"; \
	$(ARM64_ENV) $(GO) test -count=1 -exec "$(ARM64_QEMU) -L $$root" -skip '$(ARM64_SKIP)' $(ARM64_ROOT_TESTS)
	@echo "test-arm64: linux/arm64 builds, vets and passes its layout, hand/ and loader tests"
