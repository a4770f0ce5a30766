# mk/rxe.mk: the soft-RoCE integration tests, run in a throwaway VM by
# cmd/rxevm (Debian's kernel under qemu with rdma_rxe; no RDMA hardware or
# host kernel support needed). Included by the top-level Makefile; works
# alone too: make -f mk/rxe.mk rxe-test
#
#   rxe-setup  install the host packages rxevm needs and download the kernel
#              into its cache (once; rxe-test does it too when needed)
#   rxe-test   build the test binaries of RXE_TEST_PKGS on the host, run them
#              all with -test.v in one VM boot, then print how many tests ran
#              and the VM's wall time; fails if any binary fails, if no test
#              ran, or if any test skipped (inside the VM nothing may skip)
#   rxe-pair-test  the two-host suite (RXE_PAIR_PKG): one test binary run on
#              two linked VMs at once (rxevm -hosts 2), the cross-host and
#              fault tests in lock-step, then RXE_PAIR_LAST alone, which has
#              host a's VM killed; fails on any failure or skip, on zero
#              tests, and unless host b passed RXE_PAIR_LAST

GO ?= go
# Packages whose tests run in the VM.
RXE_TEST_PKGS ?= ./tests/rxe/...
# Tests that also run built with the race detector (a poller and a poster on
# different goroutines, the netpoller waits, rdma_cm's event loop).
RXE_RACE_PKGS ?= ./tests/rxe/
RXE_RACE_RUN ?= Concurrent|Wait|CM
# Extra rxevm flags, for example -timeout 30m or -v.
RXEVM_FLAGS ?=
# Where the binaries are built. The guest sees the host's filesystem but
# mounts tmpfs over /tmp and /run, so it must be neither.
RXE_TMPDIR ?= /var/tmp

# The two-host suite, and its last test, which kills host a.
RXE_PAIR_PKG ?= ./tests/cross
RXE_PAIR_LAST ?= TestFaultPeerDies

.PHONY: rxe-setup rxe-test rxe-pair-test

rxe-setup:
	$(GO) run ./cmd/rxevm -setup-only $(RXEVM_FLAGS)

# Each test binary runs in its package's directory, as go test would run it.
# The binaries and the script that runs them are in a temporary directory
# that the guest reads through its read-only view of the host.
rxe-test:
	@set -e; \
	dir=$$(mktemp -d "$(RXE_TMPDIR)/goverbs-rxe.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(GO) build -o "$$dir/rxevm" ./cmd/rxevm; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' $(RXE_TEST_PKGS) > "$$dir/pkgs"; \
	echo 'st=0' > "$$dir/run.sh"; \
	n=0; \
	while read -r pkg pkgdir; do \
		bin="$$dir/$$(echo "$$pkg" | tr / _).test"; \
		$(GO) test -c -o "$$bin" "$$pkg"; \
		if [ -f "$$bin" ]; then \
			printf '(cd "%s" && "%s" -test.v) || st=1\n' "$$pkgdir" "$$bin" >> "$$dir/run.sh"; \
			n=$$((n + 1)); \
		fi; \
	done < "$$dir/pkgs"; \
	for pkg in $$($(GO) list $(RXE_RACE_PKGS)); do \
		pkgdir=$$($(GO) list -f '{{.Dir}}' "$$pkg"); \
		bin="$$dir/$$(echo "$$pkg" | tr / _).race.test"; \
		$(GO) test -race -c -o "$$bin" "$$pkg"; \
		printf '(cd "%s" && "%s" -test.v -test.run '"'"'%s'"'"') || st=1\n' "$$pkgdir" "$$bin" '$(RXE_RACE_RUN)' >> "$$dir/run.sh"; \
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
	if [ "$$rc" -eq 0 ] && [ "$$skipped" -gt 0 ]; then echo "rxe-test: $$skipped tests skipped inside the VM, where nothing may skip" >&2; rc=1; fi; \
	exit $$rc

# Both hosts run the same script: every test but the last in one process,
# then the last in another, so that host a's death ends nothing else. The
# log prefixes each line with its host ("a| ", "b| ").
rxe-pair-test:
	@set -e; \
	dir=$$(mktemp -d "$(RXE_TMPDIR)/goverbs-pair.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(GO) build -o "$$dir/rxevm" ./cmd/rxevm; \
	$(GO) test -c -o "$$dir/pair.test" $(RXE_PAIR_PKG); \
	pkgdir=$$($(GO) list -f '{{.Dir}}' $(RXE_PAIR_PKG)); \
	printf 'cd "%s" || exit 1\nst=0\n"%s" -test.v -test.skip '"'"'^%s$$'"'"' || st=1\n"%s" -test.v -test.run '"'"'^%s$$'"'"' || st=1\nexit $$st\n' \
		"$$pkgdir" "$$dir/pair.test" '$(RXE_PAIR_LAST)' "$$dir/pair.test" '$(RXE_PAIR_LAST)' > "$$dir/run.sh"; \
	echo 'rxe-pair-test: booting two linked VMs (host a 192.0.2.1, host b 192.0.2.2)'; \
	start=$$(date +%s%N); \
	{ "$$dir/rxevm" -hosts 2 $(RXEVM_FLAGS) -- sh "$$dir/run.sh" || echo $$? > "$$dir/rc"; } 2>&1 | tee "$$dir/log"; \
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
	if [ "$$rc" -eq 0 ] && [ "$$skipped" -gt 0 ]; then echo "rxe-pair-test: $$skipped tests skipped inside the VMs, where nothing may skip" >&2; rc=1; fi; \
	if [ "$$rc" -eq 0 ] && ! grep -q '^b| --- PASS: $(RXE_PAIR_LAST) ' "$$dir/log"; then echo "rxe-pair-test: host b did not pass $(RXE_PAIR_LAST)" >&2; rc=1; fi; \
	exit $$rc
