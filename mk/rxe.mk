# mk/rxe.mk: the soft-RoCE integration tests, run in a throwaway VM by
# internal/cmd/rxevm (Debian's kernel under qemu with rdma_rxe; no RDMA hardware or
# host kernel support needed). Included by the top-level Makefile; works
# alone too: make -f mk/rxe.mk rxe-test
#
#   rxe-setup  install the host packages rxevm needs and download the kernel
#              into its cache (once; rxe-test does it too when needed); with
#              RXEVM_FLAGS='-root DIR' of an arm64 root, qemu-system-arm
#              instead of the kernel (rxe-matrix installs it otherwise)
#   rxe-test   build the test binaries of RXE_TEST_PKGS on the host, run them
#              all with -test.v in one VM boot, then print how many tests ran
#              and the VM's wall time; fails if any binary fails, if one of
#              them ran no test (a race binary whose RXE_RACE_RUN matches
#              nothing), or if any test skipped (inside the VM nothing may
#              skip)
#   soak       the long-run test (tests/soak) in a VM of its own: 1,000
#              object-set cycles, 200 rdma_cm connections, a million
#              messages; RSS, descriptors and `rdma resource` counts must end
#              where they began. About a minute under TCG. SOAK_CM_CYCLES=N
#              makes the rdma_cm phase N cycles long
#   rxe-pair-test  the two-host suite (RXE_PAIR_PKG): one test binary run on
#              two linked VMs at once (rxevm -hosts 2), the cross-host and
#              fault tests in lock-step, then RXE_PAIR_LAST alone, which has
#              host a's VM killed; fails on any failure or skip, on zero
#              tests, and unless host b passed RXE_PAIR_LAST. On the host's
#              own /, or on the root RXE_PAIR_ROOT names (rxevm
#              -setup-root): one named NAME-arm64 gets binaries cross-built
#              for linux/arm64 (ARM64_CC) and boots arm64 guests; any other
#              gets the host's build, which needs the host's glibc or newer
#              (trixie, sid; not bullseye)
#   rxe-pair-test-arm64  rxe-pair-test on RXE_PAIR_ARM64_ROOT (trixie-arm64)
#   rxe-roots  build the guest roots of RXE_ROOTS with mmdebstrap into
#              /var/cache/goverbs-rxevm/roots (once each: a root whose stamp
#              matches its recipe is not built again)
#   rxe-matrix the tests/rxe binaries in one VM boot per release of
#              RXE_MATRIX_RELEASES, each on that release's root, so against
#              its rdma-core userspace (tests/rxe-matrix.sh); one line per
#              release, again all together at the end, with the rdma-core
#              version read in the guest; fails if any release fails
#   nordma-build  go build ./... and go vet ./... chrooted into a Debian 12
#              root without rdma-core (tests/chroot-go.sh): building the
#              repository must not need rdma-core's headers or libraries;
#              then goverbs-devinfo, built and run there, must exit 1 with
#              the loader's "cannot load libibverbs.so.1" error; and
#              tests/chroot-go.sh must reach a directory under /tmp, where
#              a clone may be

GO ?= go
# Packages whose tests run in the VM: the integration tests, and the
# examples against rdma-core's C tools.
RXE_TEST_PKGS ?= ./tests/rxe/... ./examples/...
# Tests that also run built with the race detector (a poller and a poster on
# different goroutines, the netpoller waits, rdma_cm's event loop).
RXE_RACE_PKGS ?= ./tests/rxe/
RXE_RACE_RUN ?= Concurrent|Wait|CM
# Test binaries built elsewhere that run in the same boot, each from its
# own directory: make test gives the one tests/ownheaders builds from a
# scratch module outside the repository (GOVERBS_SITE_TEST_OUT).
RXE_PREBUILT ?=
# Extra rxevm flags, for example -timeout 30m or -v.
RXEVM_FLAGS ?=
# Where the binaries are built. The guest sees the host's filesystem but
# mounts tmpfs over /tmp and /run, so it must be neither.
RXE_TMPDIR ?= /var/tmp

# The two-host suite, and its last test, which kills host a; the root its
# guests boot on (empty for the host's /).
RXE_PAIR_PKG ?= ./tests/cross
RXE_PAIR_LAST ?= TestFaultPeerDies
RXE_PAIR_ROOT ?=

# Guest roots (rxevm -setup-root): bullseye (Debian 11, rdma-core 33.2),
# trixie (13, 56.1, with its own kernel, 6.12), sid (unstable, 65.0 and
# kernel 7.2 when first built; a cached root stays as it was built),
# bookworm-arm64 (12 for arm64, 44.0, with its own kernel, 6.1),
# trixie-arm64 (13 for arm64, 56.1, with its own kernel, 6.12), nordma (12
# without rdma-core).
RXE_ROOTS ?= bullseye trixie sid bookworm-arm64 trixie-arm64 nordma
# Releases rxe-matrix runs tests/rxe on; bookworm is the host's own /
# (rdma-core 44.0), bookworm-arm64 and trixie-arm64 Debian 12 and 13 for
# arm64: their binaries are cross-built and boot on qemu-system-aarch64
# (tests/rxe-matrix.sh).
RXE_MATRIX_RELEASES ?= bullseye bookworm trixie sid bookworm-arm64 trixie-arm64
RXE_MATRIX_PKGS ?= ./tests/rxe/...
# Releases whose binaries are built inside their root, with its gcc and C
# library: a binary linked on Debian 12 needs glibc 2.34, which Debian 11
# lacks; sid's gcc is the newest, with the strictest defaults a user's build
# meets. The others share one build on the host.
RXE_MATRIX_CHROOT_BUILD ?= bullseye sid
# rxe-matrix's binaries must be under the working directory: a guest on
# another root sees nothing else of the host. (.cache/ is git-ignored.)
RXE_MATRIX_TMPDIR ?= $(CURDIR)/.cache

.PHONY: rxe-setup rxe-test rxe-pair-test rxe-pair-test-arm64 rxe-roots rxe-matrix nordma-build

rxe-setup:
	$(GO) run ./internal/cmd/rxevm -setup-only $(RXEVM_FLAGS)

# Each test binary runs in its package's directory, as go test would run it.
# tests/rxe's plain sockets echo program (testdata/rsecho.c, run under
# librspreload) is built here too, with the host's cc, and named to the
# tests by GOVERBS_RSECHO: in the emulated guest cc takes a minute or more.
# The binaries and the script that runs them are in a temporary directory
# that the guest reads through its read-only view of the host.
rxe-test:
	@set -e; \
	dir=$$(mktemp -d "$(RXE_TMPDIR)/goverbs-rxe.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(GO) build -o "$$dir/rxevm" ./internal/cmd/rxevm; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' $(RXE_TEST_PKGS) > "$$dir/pkgs"; \
	echo 'st=0' > "$$dir/run.sh"; \
	cc -O2 -Wall -Wextra -Werror -o "$$dir/rsecho" tests/rxe/testdata/rsecho.c; \
	echo "export GOVERBS_RSECHO=$$dir/rsecho" >> "$$dir/run.sh"; \
	n=0; \
	while read -r pkg pkgdir; do \
		bin="$$dir/$$(echo "$$pkg" | tr / _).test"; \
		$(GO) test -c -o "$$bin" "$$pkg"; \
		if [ -f "$$bin" ]; then \
			printf 'echo "rxe-test: binary %s"\n(cd "%s" && "%s" -test.v) || st=1\n' "$$(basename "$$bin")" "$$pkgdir" "$$bin" >> "$$dir/run.sh"; \
			n=$$((n + 1)); \
		fi; \
	done < "$$dir/pkgs"; \
	for bin in $(RXE_PREBUILT); do \
		if [ ! -x "$$bin" ]; then echo "rxe-test: prebuilt test binary $$bin is missing (make test-go builds it)" >&2; exit 1; fi; \
		printf 'echo "rxe-test: binary %s"\n(cd "%s" && "%s" -test.v) || st=1\n' "$$(basename "$$bin")" "$$(dirname "$$(realpath "$$bin")")" "$$(realpath "$$bin")" >> "$$dir/run.sh"; \
		n=$$((n + 1)); \
	done; \
	race_pkgs=; \
	if [ -n '$(strip $(RXE_RACE_PKGS))' ]; then race_pkgs=$$($(GO) list $(RXE_RACE_PKGS)); fi; \
	for pkg in $$race_pkgs; do \
		pkgdir=$$($(GO) list -f '{{.Dir}}' "$$pkg"); \
		bin="$$dir/$$(echo "$$pkg" | tr / _).race.test"; \
		$(GO) test -race -c -o "$$bin" "$$pkg"; \
		printf 'echo "rxe-test: binary %s"\n(cd "%s" && "%s" -test.v -test.run '"'"'%s'"'"') || st=1\n' "$$(basename "$$bin")" "$$pkgdir" "$$bin" '$(RXE_RACE_RUN)' >> "$$dir/run.sh"; \
		n=$$((n + 1)); \
	done; \
	echo 'exit $$st' >> "$$dir/run.sh"; \
	if [ $$n -eq 0 ]; then echo "rxe-test: no test binaries in $(RXE_TEST_PKGS)" >&2; exit 1; fi; \
	printf 'rxe-test: test binaries to run in one VM boot: %d\n' $$n; \
	start=$$(date +%s%N); \
	{ "$$dir/rxevm" $(RXEVM_FLAGS) -- sh "$$dir/run.sh" || echo $$? > "$$dir/rc"; } 2>&1 | tee "$$dir/log"; \
	end=$$(date +%s%N); \
	rc=$$(cat "$$dir/rc" 2>/dev/null || echo 0); \
	ran=$$(grep -c '^=== RUN' "$$dir/log" || true); \
	passed=$$(grep -c '^ *--- PASS' "$$dir/log" || true); \
	failed=$$(grep -c '^ *--- FAIL' "$$dir/log" || true); \
	skipped=$$(grep -c '^ *--- SKIP' "$$dir/log" || true); \
	ms=$$(( (end - start) / 1000000 )); \
	printf 'rxe-test: %d tests ran in the VM (%d passed, %d failed, %d skipped); VM wall time %d.%ds (boot included)\n' \
		"$$ran" "$$passed" "$$failed" "$$skipped" $$((ms / 1000)) $$((ms % 1000 / 100)); \
	if [ "$$rc" -eq 0 ] && [ "$$ran" -eq 0 ]; then echo "rxe-test: no tests ran" >&2; rc=1; fi; \
	idle=$$(awk '/^rxe-test: binary /{if (b != "" && n == 0) print b; b = $$3; n = 0; next} /^=== RUN/{n++} END{if (b != "" && n == 0) print b}' "$$dir/log"); \
	if [ "$$rc" -eq 0 ] && [ -n "$$idle" ]; then echo "rxe-test: these test binaries ran no test (does RXE_RACE_RUN match any?):" $$idle >&2; rc=1; fi; \
	if [ "$$rc" -eq 0 ] && [ "$$skipped" -gt 0 ]; then echo "rxe-test: $$skipped tests skipped inside the VM, where nothing may skip" >&2; rc=1; fi; \
	exit $$rc

# Both hosts run the same script: every test but the last in one process,
# then the last in another, so that host a's death ends nothing else. The
# log prefixes each line with its host ("a| ", "b| "). The first process's
# exit status is printed before the last test (pair-first-status=N): host
# a never reaches the script's exit, so its status would be lost.
# A guest on another root sees only it and the working directory: the
# binaries then go under .cache/ (git-ignored), as rxe-matrix's do.
rxe-pair-test:
	@set -e; \
	tmp='$(RXE_TMPDIR)'; rootflag=; \
	if [ -n '$(RXE_PAIR_ROOT)' ]; then \
		tmp='$(RXE_MATRIX_TMPDIR)'; mkdir -p "$$tmp"; tmp=$$(realpath "$$tmp"); \
		case "$$tmp/" in "$$(pwd -P)"/*) ;; *) echo "rxe-pair-test: RXE_MATRIX_TMPDIR=$$tmp is not under $$(pwd -P), the one directory of the host that a guest on another root sees" >&2; exit 2;; esac; \
	fi; \
	dir=$$(mktemp -d "$$tmp/goverbs-pair.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(GO) build -o "$$dir/rxevm" ./internal/cmd/rxevm; \
	if [ -n '$(RXE_PAIR_ROOT)' ]; then \
		root=$$("$$dir/rxevm" $(RXEVM_FLAGS) -setup-root '$(RXE_PAIR_ROOT)'); rootflag="-root $$root"; \
		echo "rxe-pair-test: on root $(RXE_PAIR_ROOT) ($$root)"; \
	fi; \
	case '$(RXE_PAIR_ROOT)' in \
	*-arm64) GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC='$(or $(ARM64_CC),aarch64-linux-gnu-gcc)' $(GO) test -c -o "$$dir/pair.test" $(RXE_PAIR_PKG);; \
	*) $(GO) test -c -o "$$dir/pair.test" $(RXE_PAIR_PKG);; \
	esac; \
	pkgdir=$$($(GO) list -f '{{.Dir}}' $(RXE_PAIR_PKG)); \
	printf 'cd "%s" || exit 1\nst=0\n"%s" -test.v -test.skip '"'"'^%s$$'"'"' || st=1\necho "pair-first-status=$$st"\n"%s" -test.v -test.run '"'"'^%s$$'"'"' || st=1\nexit $$st\n' \
		"$$pkgdir" "$$dir/pair.test" '$(RXE_PAIR_LAST)' "$$dir/pair.test" '$(RXE_PAIR_LAST)' > "$$dir/run.sh"; \
	echo 'rxe-pair-test: booting two linked VMs (host a 192.0.2.1, host b 192.0.2.2)'; \
	start=$$(date +%s%N); \
	{ "$$dir/rxevm" -hosts 2 $$rootflag $(RXEVM_FLAGS) -- sh "$$dir/run.sh" || echo $$? > "$$dir/rc"; } 2>&1 | tee "$$dir/log"; \
	end=$$(date +%s%N); \
	rc=$$(cat "$$dir/rc" 2>/dev/null || echo 0); \
	ran=$$(grep -c '^[ab]| === RUN' "$$dir/log" || true); \
	passed=$$(grep -c '^[ab]| *--- PASS' "$$dir/log" || true); \
	failed=$$(grep -c '^[ab]| *--- FAIL' "$$dir/log" || true); \
	skipped=$$(grep -c '^[ab]| *--- SKIP' "$$dir/log" || true); \
	ms=$$(( (end - start) / 1000000 )); \
	printf 'rxe-pair-test: %d test runs on two hosts (%d passed, %d failed, %d skipped; host a died in %s as planned); wall time %d.%ds (boots included)\n' \
		"$$ran" "$$passed" "$$failed" "$$skipped" '$(RXE_PAIR_LAST)' $$((ms / 1000)) $$((ms % 1000 / 100)); \
	if [ "$$rc" -eq 0 ] && [ "$$ran" -eq 0 ]; then echo "rxe-pair-test: no tests ran" >&2; rc=1; fi; \
	if [ "$$rc" -eq 0 ] && [ "$$failed" -gt 0 ]; then echo "rxe-pair-test: $$failed tests failed" >&2; rc=1; fi; \
	for h in a b; do \
		if [ "$$rc" -eq 0 ] && ! grep -q "^$$h| pair-first-status=0" "$$dir/log"; then \
			echo "rxe-pair-test: host $$h's run of every test but $(RXE_PAIR_LAST) did not exit 0 (no pair-first-status=0 line)" >&2; rc=1; \
		fi; \
	done; \
	if [ "$$rc" -eq 0 ] && [ "$$skipped" -gt 0 ]; then echo "rxe-pair-test: $$skipped tests skipped inside the VMs, where nothing may skip" >&2; rc=1; fi; \
	if [ "$$rc" -eq 0 ] && ! grep -q '^b| --- PASS: $(RXE_PAIR_LAST) ' "$$dir/log"; then echo "rxe-pair-test: host b did not pass $(RXE_PAIR_LAST)" >&2; rc=1; fi; \
	exit $$rc

# On Debian 13's arm64 root: its rdma-core (56.1) and kernel (6.12) meet the
# faults there, where rxe-pair-test's amd64 guests run 44.0 on 6.1, and
# rxe-matrix already runs bookworm-arm64's single-host suite.
RXE_PAIR_ARM64_ROOT ?= trixie-arm64
rxe-pair-test-arm64:
	@$(MAKE) --no-print-directory rxe-pair-test RXE_PAIR_ROOT=$(RXE_PAIR_ARM64_ROOT)

rxe-roots:
	@set -e; for r in $(RXE_ROOTS); do $(GO) run ./internal/cmd/rxevm $(RXEVM_FLAGS) -setup-root "$$r" > /dev/null; done

rxe-matrix:
	@GO='$(GO)' ARM64_CC='$(ARM64_CC)' RXE_MATRIX_RELEASES='$(RXE_MATRIX_RELEASES)' RXE_MATRIX_PKGS='$(RXE_MATRIX_PKGS)' \
		RXE_MATRIX_CHROOT_BUILD='$(RXE_MATRIX_CHROOT_BUILD)' RXE_MATRIX_TMPDIR='$(RXE_MATRIX_TMPDIR)' \
		RXEVM_FLAGS='$(RXEVM_FLAGS)' bash tests/rxe-matrix.sh

# The root must really lack rdma-core, or the check proves nothing.
nordma-build:
	@set -e; \
	root=$$($(GO) run ./internal/cmd/rxevm $(RXEVM_FLAGS) -setup-root nordma); \
	if [ -e "$$root/usr/include/infiniband" ] || ls "$$root"/usr/lib/*/libibverbs* > /dev/null 2>&1; then \
		echo "nordma-build: $$root has rdma-core in it: remove it and its stamp to have it built again" >&2; exit 1; \
	fi; \
	echo "nordma-build: go build ./... && go vet ./... in $$root (Debian 12, no rdma-core)"; \
	if GO='$(GO)' bash tests/chroot-go.sh "$$root" . sh -c 'go build ./... && go vet ./...'; then \
		echo "nordma-build: the repository builds and vets without rdma-core"; \
	else \
		echo "nordma-build: FAILED: the repository does not build without rdma-core installed (see above)" >&2; exit 1; \
	fi; \
	mkdir -p .cache/nordma; \
	st=0; out=$$(GO='$(GO)' bash tests/chroot-go.sh "$$root" . sh -c \
		'go build -o .cache/nordma/ ./cmd/goverbs-devinfo && exec .cache/nordma/goverbs-devinfo' 2>&1) || st=$$?; \
	echo "nordma-build: goverbs-devinfo there exits $$st: $$out"; \
	case "$$st:$$out" in \
	1:*"cannot load libibverbs.so.1 (libibverbs.so.1: cannot open shared object file"*"install package libibverbs1"*) \
		echo "nordma-build: without rdma-core the program starts and says what to install";; \
	*) echo "nordma-build: FAILED: want exit status 1 and the loader's 'cannot load libibverbs.so.1' error" >&2; exit 1;; \
	esac; \
	tmpdir=$$(mktemp -d /tmp/goverbs-chroot.XXXXXX); \
	where=$$(GO='$(GO)' bash tests/chroot-go.sh "$$root" "$$tmpdir" /bin/pwd) || where=; \
	rmdir "$$tmpdir"; \
	if [ "$$where" != "$$tmpdir" ]; then \
		echo "nordma-build: FAILED: tests/chroot-go.sh does not reach a directory under /tmp ($$tmpdir), where a clone may be" >&2; exit 1; \
	fi; \
	echo "nordma-build: tests/chroot-go.sh reaches a directory under /tmp, where a clone may be"

# SOAK_CM_CYCLES=N runs N rdma_cm cycles (200 when empty) with the same
# bound, logging where the memory is every 100 cycles: a long run tells a
# slope from a plateau (2,000 cycles: about 7 minutes under TCG).
SOAK_CM_CYCLES ?=
.PHONY: soak
soak:
	$(MAKE) --no-print-directory rxe-test RXE_TEST_PKGS=./tests/soak RXE_RACE_PKGS= \
		$(if $(SOAK_CM_CYCLES),RXEVM_FLAGS='$(RXEVM_FLAGS) -env GOVERBS_SOAK_CM_CYCLES=$(SOAK_CM_CYCLES)')
