# mk/arm64.mk: the linux/arm64 build, checked on an amd64 machine.
# Included by the top-level Makefile; every variable can be set on the make
# command line.
#
#   make test-arm64  cross-builds and vets every package for linux/arm64 with
#                    Debian's aarch64-linux-gnu-gcc (the cgo preambles'
#                    layout assertions compile against arm64's glibc there),
#                    then runs the layout test (gcc's sizeof, _Alignof and
#                    offsetof against the Go types) and the generated
#                    packages' tests under qemu-aarch64 user emulation.
#                    make deps installs the cross compiler and qemu.

GO ?= go
ARM64_CC ?= aarch64-linux-gnu-gcc
ARM64_SYSROOT ?= /usr/aarch64-linux-gnu
ARM64_QEMU ?= qemu-aarch64-static
ARM64_TESTS ?= ./tests/layout/ ./generated/...
ARM64_ENV = GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$(ARM64_CC)

.PHONY: test-arm64

test-arm64:
	@command -v $(ARM64_CC) >/dev/null || { echo "test-arm64: $(ARM64_CC) not found (make deps)" >&2; exit 1; }
	@command -v $(ARM64_QEMU) >/dev/null || { echo "test-arm64: $(ARM64_QEMU) not found (make deps)" >&2; exit 1; }
	$(ARM64_ENV) $(GO) build ./...
	$(ARM64_ENV) $(GO) vet ./...
	$(ARM64_ENV) $(GO) test -count=1 -exec '$(ARM64_QEMU) -L $(ARM64_SYSROOT)' $(ARM64_TESTS)
	@echo "test-arm64: linux/arm64 builds, vets and passes its layout test"
