# mk/demo.mk: the project's main job on its default device, for a newcomer.
# Included by the top-level Makefile; works alone too: make -f mk/demo.mk demo
#
#   demo   build goverbs-devinfo, goverbs-pingpong and goverbs-rping, boot
#          the soft-RoCE VM (internal/cmd/rxevm: rxe0 on veth0, 192.0.2.1) once and,
#          inside it, show the device, then run a Go ping-pong server and
#          client (RC send/receive, ibv_rc_pingpong's protocol) and a Go
#          rping server and client (rdma_cm, RDMA read and write), each pair
#          talking over rxe0. Every line says which side printed it.

GO ?= go
# Where the binaries go: the guest mounts tmpfs on /tmp and /run.
DEMO_TMPDIR ?= /var/tmp
DEMO_ITERS ?= 1000
DEMO_PINGS ?= 5
RXEVM_FLAGS ?=

# The script the VM runs; $$1 is the directory of the binaries.
define DEMO_SCRIPT
set -e
bin=$$1
dev=$${RXE_DEVICE:-rxe0} gid=$${RXE_GID_INDEX:-1} addr=$${RXE_ADDR:-192.0.2.1}
side() { sed -u "s/^/  $$1 | /"; }
echo
echo "== 1. the device: goverbs-devinfo -d $$dev -i 1 -v (GID table at the end)"
"$$bin/goverbs-devinfo" -d "$$dev" -i 1 -v | grep -E 'hca_id|transport|node_guid|state|active_mtu|link_layer|GID' | side devinfo
echo
echo "== 2. RC ping-pong: goverbs-pingpong server and client, $(DEMO_ITERS) round trips of 4096 bytes"
echo "   (either side could be rdma-core's ibv_rc_pingpong: same TCP exchange, same output)"
"$$bin/goverbs-pingpong" -d "$$dev" -g "$$gid" -n $(DEMO_ITERS) 2>&1 | side server &
srv=$$!
i=0; until grep -q ':4853 [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2>/dev/null; do i=$$((i+1)); [ $$i -lt 200 ] || { echo "server did not listen"; exit 1; }; sleep 0.05; done
"$$bin/goverbs-pingpong" -d "$$dev" -g "$$gid" -n $(DEMO_ITERS) "$$addr" 2>&1 | side client
wait $$srv
echo
echo "== 3. rping over rdma_cm: the server RDMA-reads each ping from the client and RDMA-writes it back"
echo "   (either side could be rdma-core's rping)"
"$$bin/goverbs-rping" -s -a "$$addr" -v 2>&1 | side server &
srv=$$!
i=0; until rdma resource show cm_id 2>/dev/null | grep -q 'LISTEN.*:7174'; do i=$$((i+1)); [ $$i -lt 200 ] || { echo "server did not listen"; exit 1; }; sleep 0.05; done
"$$bin/goverbs-rping" -c -a "$$addr" -C $(DEMO_PINGS) -v -V 2>&1 | side client
wait $$srv
echo
echo "== demo done: Go over real verbs on $$dev (soft-RoCE). Next: make rxe-test runs the interop tests against the C tools."
endef
export DEMO_SCRIPT

.PHONY: demo

demo:
	@set -e; \
	dir=$$(mktemp -d "$(DEMO_TMPDIR)/goverbs-demo.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	echo "demo: building internal/cmd/rxevm and the Go tools"; \
	for c in internal/cmd/rxevm cmd/goverbs-devinfo cmd/goverbs-pingpong cmd/goverbs-rping; do \
		$(GO) build -o "$$dir/$${c##*/}" ./$$c; \
	done; \
	printf '%s\n' "$$DEMO_SCRIPT" > "$$dir/demo.sh"; \
	echo "demo: booting the soft-RoCE VM (10-25 s under TCG)"; \
	"$$dir/rxevm" $(RXEVM_FLAGS) -- sh "$$dir/demo.sh" "$$dir"

# build_perf_tools builds rxevm, goverbs-perf and goverbs-perfcompare into
# $$dir; perf_tools does it in a new directory (goverbs-NAME.*), removed
# when the recipe ends.
define build_perf_tools
for c in internal/cmd/rxevm cmd/goverbs-perf internal/cmd/goverbs-perfcompare; do \
		$(GO) build -o "$$dir/$${c##*/}" ./$$c; \
	done
endef

# insns_tools builds into $$dir what an instruction count runs: rxevm, the
# comparing command internal/cmd/$(1), the Go tool $(2) from package $(3) as
# a PIE (so that its code is not at the addresses of the VM's other Go
# processes) and qemu's insncount plugin.
define insns_tools
for c in internal/cmd/rxevm internal/cmd/$(1); do \
		$(GO) build -o "$$dir/$${c##*/}" ./$$c; \
	done; \
	$(GO) build -buildmode=pie -o "$$dir/$(2)" ./$(3); \
	gcc -shared -fPIC -O2 -Wall -Wextra -Werror -fvisibility=hidden -o "$$dir/insncount.so" \
		internal/cmd/goverbs-perfcompare/insncount/insncount.c
endef

define perf_tools
dir=$$(mktemp -d "$(DEMO_TMPDIR)/goverbs-$(1).XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(build_perf_tools)
endef

# perf-compare: goverbs-perf against perftest's ib_write_bw, ib_read_bw,
# ib_send_bw and ib_send_lat on rxe0, like for like (post list 1, CQ
# moderation as both default it: 100, but 1 above 8 KiB without events),
# at PERF_SIZES, each tool 5 times a row, alternately
# (PERF_FLAGS='-reps N' for more), 20,000 messages a run (5,000 round trips
# for send_lat, and no more than 128 MiB: 2,048 at 64 KiB). Each table gives
# per row the min/median/max of each tool, the ratio of the medians,
# send_lat's tails, each tool's context switches a message, and one
# `perf <mode> <size> <c median msg/s> <go median msg/s> <go/c>` line
# (internal/cmd/goverbs-perfcompare); a goverbs-perf loop that allocates fails it.
#
# The VM runs on one vCPU under qemu's -icount shift=0,sleep=off, where
# guest time is instructions executed (1 ns each), so host load does not
# move the rates: three complete runs agreed within 2.8% a row (check yours
# with goverbs-perfcompare -agree 5 LOG1 LOG2), where in real time perftest
# alone spreads by up to 60% (BENCHMARKS.md, "How perf-compare runs").
# goverbs-perfcompare runs six times in the one boot
# (nine with PERF_PROCS): write_bw and read_bw busy-polling with
# goverbs-perf as it is (-loop go), then with its loops in Go calling the C
# loop's own post and poll, a cgo call each (-loop cgo), then with its
# loops written in C in the same process (-loop c), so the three tables
# tell what hand/ costs (go against cgo) from what the crossings cost (cgo
# against c) and what the rest of the Go process costs (c against
# perftest); then send_bw and send_lat with both tools waiting for
# completion events (-events, perftest's -e), since their busy-polling
# servers would share the one vCPU with the client and hand over only at
# the scheduler's tick; goverbs-perf -e waits blocked in the channel's read
# on its thread (PERF_FLAGS='-wait netpoll' parks on the netpoller, with the Go
# runtime's sysmon kept awake; add -sysmon-nap for the runtime's default).
# perftest refuses -e for RDMA writes and reads. goverbs-perf's send_bw
# server returns to Go once it holds 16 receives (-wait-min), so send_bw
# runs again with -wait-min 1, a return at every wake, as perftest's loop
# makes, and again with -loop cgo, whose loops wait in C as hand's thread
# wait does at every wake, with nothing of goverbs' on the path, to tell
# hand's wait from the crossing. Then, for each count in
# PERF_PROCS, the Go loops and the event rows again with goverbs-perf
# -gomaxprocs N: the one vCPU gives the Go runtime one P, and with none idle
# its sysmon takes the P from any cgo call that outlasts its 20 us tick,
# where on a host with more CPUs an idle P makes it leave the call alone;
# 2 Ps on the one vCPU show that, at the price of the runtime's spinning
# threads sharing the CPU. There send_lat runs with goverbs-perf
# -lock-thread: unlocked, its goroutine moves between threads and a run
# takes one of two speeds, 12% apart, so two complete runs could not agree
# on the row. PERF_PROCS= skips
# them. About 28 minutes (20 without). perf-icount is its earlier name.
PERF_SIZES ?= 64,4096,65536
PERF_FLAGS ?=
PERF_PROCS ?= 2
# The guest's clock: TCG's vCPUs fail the kernel's TSC check, and on HPET
# every clock read (Go's runtime, perftest's timestamps) is a syscall and an
# emulated device access; real machines read the TSC in the vDSO
# (BENCHMARKS.md, "How perf-compare runs").
PERF_RXEVM_FLAGS ?= -kernel-args 'clocksource=tsc tsc=reliable'

.PHONY: perf-compare perf-icount

perf-compare:
	@set -e; \
	$(call perf_tools,perf); \
	echo "perf-compare: booting the soft-RoCE VM on one vCPU under -icount; write_bw and read_bw at $(PERF_SIZES), Go loops, cgo loops, then C loops, then send_bw and send_lat waiting for events, and send_bw with -wait-min 1 and with -loop cgo; then both again with goverbs-perf -gomaxprocs $(or $(PERF_PROCS),(none)), send_lat with -lock-thread"; \
	"$$dir/rxevm" $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -smp 1 -icount shift=0,sleep=off -timeout 60m -- sh -c \
		'd=$$1; \
		pass() { echo "== $$1"; shift; "$$d/goverbs-perfcompare" -perf "$$d/goverbs-perf" "$$@" -sizes $(PERF_SIZES) $(PERF_FLAGS) || exit 1; }; \
		for loop in go cgo c; do pass "goverbs-perf -loop $$loop" -loop $$loop -modes write_bw,read_bw; done; \
		pass "both tools waiting for completion events (-e)" -events -modes send_bw,send_lat; \
		pass "both waiting for events, goverbs-perf'"'"'s send_bw server returning to Go at every wake (-wait-min 1)" -events -wait-min 1 -modes send_bw; \
		pass "both waiting for events, goverbs-perf -loop cgo: waiting in C at every wake, nothing of goverbs on the path" -events -loop cgo -modes send_bw; \
		for procs in $(PERF_PROCS); do \
			pass "goverbs-perf -gomaxprocs $$procs, busy-polling" -gomaxprocs $$procs -modes write_bw,read_bw; \
			pass "goverbs-perf -gomaxprocs $$procs, both tools waiting for completion events (-e)" -gomaxprocs $$procs -events -modes send_bw; \
			pass "goverbs-perf -gomaxprocs $$procs -lock-thread, both tools waiting for completion events (-e)" -gomaxprocs $$procs -lock-thread -events -modes send_lat; \
		done' sh "$$dir"

perf-icount: perf-compare

# rsocket-compare: the Go rsocket (internal/cmd/goverbs-rsockstream, rstream's
# test on package rsocket) against rstream (librdmacm's rsocket in C) and
# both tools on the kernel's TCP, in one soft-RoCE VM boot, both ends on
# 192.0.2.1 (rxe0): the 64 B round trip and the throughput of 64 KiB and
# 1 MiB transfers, each column RSOCK_COMPARE_REPS times, alternately; a
# markdown table of min/median/max a cell and Go's median over each other
# column's (internal/cmd/goverbs-rsockcompare). Columns (RSOCK_COMPARE_COLS):
# Go at both ends, rstream blocking in its calls (-T b, as the Go rsocket's
# calls park), TCP from rstream (-T s -T b) and from Go (net.TCPConn). One
# vCPU under -icount, as perf-compare, so host load does not move the
# figures; rstream's default mode, spinning on non-blocking calls, has no
# column there: two spinning peers on one vCPU hand over only at the
# scheduler's tick (4 ms a transfer). rsocket-compare-realtime runs it too,
# in real time on the VM's 2 vCPUs, where the host's load moves every
# figure. RSOCK_COMPARE_FLAGS go to goverbs-rsockcompare (-v: every run's
# line; -lat-iters, -bw64k-xfers, -bw1m-xfers). About 4 minutes (realtime:
# 20 on a loaded 2-core host). RSOCK_COMPARE_COLS=go,c-block,go-cblock,cblock-go
# adds the mixed pairs.
RSOCK_COMPARE_REPS ?= 5
RSOCK_COMPARE_COLS ?= go,c-block,tcp-c,tcp-go
RSOCK_COMPARE_FLAGS ?=
RSOCK_COMPARE_RXEVM_FLAGS ?= -smp 1 -icount shift=0,sleep=off

.PHONY: rsocket-compare rsocket-compare-realtime

rsocket-compare:
	@set -e; \
	dir=$$(mktemp -d "$(DEMO_TMPDIR)/goverbs-rsockcompare.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	for c in internal/cmd/rxevm internal/cmd/goverbs-rsockstream internal/cmd/goverbs-rsockcompare; do \
		$(GO) build -o "$$dir/$${c##*/}" ./$$c; \
	done; \
	echo "rsocket-compare: booting the soft-RoCE VM ($(RSOCK_COMPARE_RXEVM_FLAGS)); $(RSOCK_COMPARE_COLS), $(RSOCK_COMPARE_REPS) runs a cell"; \
	"$$dir/rxevm" $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) $(RSOCK_COMPARE_RXEVM_FLAGS) -timeout 30m -- \
		"$$dir/goverbs-rsockcompare" -go "$$dir/goverbs-rsockstream" -cols $(RSOCK_COMPARE_COLS) -reps $(RSOCK_COMPARE_REPS) $(RSOCK_COMPARE_FLAGS)

rsocket-compare-realtime:
	@$(MAKE) --no-print-directory rsocket-compare RSOCK_COMPARE_RXEVM_FLAGS='-smp 2' RSOCK_COMPARE_COLS=go,c-block,c-spin,tcp-c,tcp-go

# perf-compare-realtime: the same tools and rows in real time, on the VM's
# 2 vCPUs under multi-threaded TCG, where send_bw's and send_lat's servers
# busy-poll as perftest's do by default: what a user's two cores see, with
# the host's load in it. Under TCG only the ratios mean anything, and runs
# of one tool spread by 3-60% with the host's load, so a gap under about
# 10% is not a measurement here. About 5 minutes.
.PHONY: perf-compare-realtime

perf-compare-realtime:
	@set -e; \
	$(call perf_tools,perf); \
	echo "perf-compare-realtime: booting the soft-RoCE VM; perftest and goverbs-perf on rxe0, sizes $(PERF_SIZES)"; \
	"$$dir/rxevm" $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -timeout 45m -- "$$dir/goverbs-perfcompare" -perf "$$dir/goverbs-perf" -sizes $(PERF_SIZES) $(PERF_FLAGS)

# perf-tails: explains send_lat's slow round trips. One VM boot runs
# goverbs-perf send_lat PERF_TAILS_RUNS times at each of PERF_TAILS_SIZES,
# each under `perf record -a` (scheduler switches and wakeups, timer
# interrupts, on CLOCK_MONOTONIC), the client writing each round trip's
# start and length (-lat-dump); goverbs-perfcompare -tails then names, for
# every round trip over 3 times the median, the likeliest cause within it
# (internal/cmd/goverbs-perfcompare/tails) and prints how often each kind of event
# happened. Needs perf (linux-perf, installed when missing). About 20 s a
# run under TCG, most of it perf's start, which goverbs-perfcompare waits
# for (perf's control FIFO). PERF_TAILS_FLAGS go to goverbs-perfcompare
# (e.g. -events -gomaxprocs 2 -lock-thread for perf-compare's two-P
# send_lat row; -tails-stacks for the wakeups' call chains, counted by
# the waker's) and RXEVM_FLAGS to rxevm (-smp 1 -icount shift=0,sleep=off
# for perf-compare's guest).
PERF_TAILS_RUNS ?= 3
PERF_TAILS_SIZES ?= 64
PERF_TAILS_FLAGS ?=

.PHONY: perf-tails

perf-tails:
	@set -e; \
	command -v perf >/dev/null || { echo "perf-tails: installing linux-perf"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends linux-perf >/dev/null; }; \
	$(call perf_tools,tails); \
	echo "perf-tails: booting the soft-RoCE VM; goverbs-perf send_lat under perf record, sizes $(PERF_TAILS_SIZES)"; \
	"$$dir/rxevm" $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -timeout 30m -- "$$dir/goverbs-perfcompare" -perf "$$dir/goverbs-perf" -sizes $(PERF_TAILS_SIZES) -tails $(PERF_TAILS_RUNS) $(PERF_TAILS_FLAGS)

# perf-insns: counts the guest instructions per message of perftest and
# goverbs-perf (both sides and the kernel) in PERF_INSNS_MODES at
# PERF_INSNS_SIZES: qemu runs the VM with the insncount plugin
# (internal/cmd/goverbs-perfcompare/insncount, built here with gcc), goverbs-perfcompare
# -insns runs each tool at the iterations and at four times them between the
# plugin's markers (perftest's bandwidth tools with -N, so that the peak
# search of their report, quadratic in the iterations, is not counted as a
# message's work), and -insns-report prints per row the instructions per
# message by region (kernel, tool binary, each library) and the functions
# where Go and C differ most. goverbs-perf is built as a PIE so that its
# code is not at the addresses of the VM's other Go processes. About 2 minutes
# for the defaults. The files stay in PERF_INSNS_DIR.
PERF_INSNS_MODES ?= write_bw,send_lat
PERF_INSNS_SIZES ?= 64
PERF_INSNS_FLAGS ?= -bw-iters 5000 -lat-iters 2000 -max-bytes 33554432
PERF_INSNS_DIR ?= $(DEMO_TMPDIR)/goverbs-perf-insns

.PHONY: perf-insns

perf-insns:
	@set -e; \
	dir=$(PERF_INSNS_DIR); rm -rf "$$dir"; mkdir -p "$$dir/insns"; \
	$(call insns_tools,goverbs-perfcompare,goverbs-perf,cmd/goverbs-perf); \
	echo "perf-insns: booting the soft-RoCE VM with qemu's insncount plugin; $(PERF_INSNS_MODES) at $(PERF_INSNS_SIZES) B"; \
	cd "$$dir" && ./rxevm $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -plugin "$$dir/insncount.so,out=$$dir/insns/snaps.txt" -timeout 45m -- \
		./goverbs-perfcompare -perf ./goverbs-perf -insns insns -modes $(PERF_INSNS_MODES) -sizes $(PERF_INSNS_SIZES) $(PERF_INSNS_FLAGS); \
	./goverbs-perfcompare -insns-report insns

# rsocket-insns: counts the guest instructions of the Go rsocket and of
# rstream -T b (both ends and the kernel) per 64 B round trip and per
# 64 KiB transfer, as perf-insns does for goverbs-perf: qemu runs the VM
# (one vCPU under -icount, as rsocket-compare) with the insncount plugin,
# goverbs-rsockcompare -insns runs each tool at RSOCK_INSNS_ROUNDTRIPS
# round trips and RSOCK_INSNS_XFERS transfers each way, and at four times
# them, each client between the plugin's markers, and -insns-report prints
# per row the instructions by region (kernel, rstream's binary,
# goverbs-rsockstream's Go runtime and the rest, each library) and the
# functions where Go and C differ most, and beside them each tool's time a
# round trip or transfer by the clients' rates, which under -icount
# shift=0 should match the instructions (1 ns each). Over four boots
# rstream's round trip repeated within 3% (61,000-63,000); the Go
# rsocket's followed its time, which is bimodal under -icount (75,000 to
# 90,000), the kernel's and the runtime's scheduler's shares moving and
# goverbs' own code's not (7,400 in every boot). "unmapped" is the guest's
# other processes (goverbs-rsockcompare among them): noise of a few
# thousand a round trip, of either sign.
# goverbs-rsockstream is built as a PIE so that its code is not at the
# addresses of the VM's other Go processes. About 2 minutes. The files stay
# in RSOCK_INSNS_DIR; RSOCK_INSNS_FLAGS go to the report (-insns-top N,
# -insns-filter TEXT).
RSOCK_INSNS_ROUNDTRIPS ?= 1000
RSOCK_INSNS_XFERS ?= 100
RSOCK_INSNS_FLAGS ?=
RSOCK_INSNS_DIR ?= $(DEMO_TMPDIR)/goverbs-rsocket-insns

.PHONY: rsocket-insns

rsocket-insns:
	@set -e; \
	dir=$(RSOCK_INSNS_DIR); rm -rf "$$dir"; mkdir -p "$$dir/insns"; \
	$(call insns_tools,goverbs-rsockcompare,goverbs-rsockstream,internal/cmd/goverbs-rsockstream); \
	echo "rsocket-insns: booting the soft-RoCE VM with qemu's insncount plugin; Go rsocket and rstream -T b, 64 B round trips and 64 KiB transfers"; \
	cd "$$dir" && ./rxevm $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) $(RSOCK_COMPARE_RXEVM_FLAGS) -plugin "$$dir/insncount.so,out=$$dir/insns/snaps.txt" -timeout 30m -- \
		./goverbs-rsockcompare -go ./goverbs-rsockstream -insns insns -lat-iters $(RSOCK_INSNS_ROUNDTRIPS) -bw64k-xfers $(RSOCK_INSNS_XFERS); \
	./goverbs-rsockcompare -insns-report insns $(RSOCK_INSNS_FLAGS)

# perf-profile: CPU profiles (pprof) of goverbs-perf in the VM, on one vCPU
# under -icount as perf-compare runs it: write_bw and read_bw busy-polling,
# then send_bw and send_lat waiting for events, at PERF_PROFILE_SIZES, each
# row once, the client and (in send_bw and send_lat, where it runs a loop)
# the server each profiling its timed part (goverbs-perfcompare -profile);
# then, on the host, `go tool pprof -top` of each profile. pprof sees Go
# code only: a sample inside a cgo call (C, and the kernel's work under it,
# rxe's doorbell and completions) counts as runtime.cgocall's own, so what
# stands beside it is what Go adds, and perf-insns is what splits the
# crossing from C. It samples at 100 Hz of the process's CPU time, hence
# ten times perf-compare's messages (200,000, 50,000 round trips, up to 1
# GiB a row). The profiles stay in PERF_PROFILE_DIR. Add -gomaxprocs 2 to
# PERF_PROFILE_FLAGS for two Ps. About 4 minutes.
PERF_PROFILE_SIZES ?= 64,4096
PERF_PROFILE_FLAGS ?= -bw-iters 200000 -lat-iters 50000 -max-bytes 1073741824
PERF_PROFILE_TOP ?= 15
PERF_PROFILE_DIR ?= $(DEMO_TMPDIR)/goverbs-perf-profile

.PHONY: perf-profile

perf-profile:
	@set -e; \
	dir=$(PERF_PROFILE_DIR); rm -rf "$$dir"; mkdir -p "$$dir/prof"; \
	$(build_perf_tools); \
	echo "perf-profile: booting the soft-RoCE VM on one vCPU under -icount; goverbs-perf profiled at $(PERF_PROFILE_SIZES) B"; \
	cd "$$dir" && ./rxevm $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -smp 1 -icount shift=0,sleep=off -timeout 30m -- sh -c \
		'./goverbs-perfcompare -perf ./goverbs-perf -profile prof -modes write_bw,read_bw -sizes $(PERF_PROFILE_SIZES) $(PERF_PROFILE_FLAGS) && \
		./goverbs-perfcompare -perf ./goverbs-perf -profile prof -events -modes send_bw,send_lat -sizes $(PERF_PROFILE_SIZES) $(PERF_PROFILE_FLAGS)'; \
	for f in prof/*.prof; do \
		echo; echo "== $$f"; $(GO) tool pprof -top -nodecount=$(PERF_PROFILE_TOP) ./goverbs-perf "$$f"; \
	done

# bench-guest: hand's fast-path benchmarks (make bench's test binary, built
# on the host) run inside the soft-RoCE VM, where TCG prices a cgo crossing
# and a post as the perf targets' runs see them. BENCH_GUEST_PATTERN picks
# the cases; about 15 seconds for the default.
BENCH_GUEST_PATTERN ?= ^BenchmarkCgoEmpty$$|^BenchmarkFast$$/^(post_send_write|poll_cq|poll_cq_spin)$$/^(1|64)$$
BENCH_GUEST_TIME ?= 200ms

.PHONY: bench-guest

bench-guest:
	@set -e; \
	dir=$$(mktemp -d "$(DEMO_TMPDIR)/goverbs-bench-guest.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(GO) build -o "$$dir/rxevm" ./internal/cmd/rxevm; \
	$(GO) test -c -o "$$dir/hand.test" ./hand; \
	echo "bench-guest: booting the soft-RoCE VM; hand's benchmarks $(BENCH_GUEST_PATTERN) inside it"; \
	cd hand && "$$dir/rxevm" $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -timeout 20m -- \
		"$$dir/hand.test" -test.run '^$$' -test.bench '$(BENCH_GUEST_PATTERN)' -test.benchtime $(BENCH_GUEST_TIME)

# perf-cmtime: connection setup, rdma-core's cmtime against goverbs-cmtime
# (cmd/goverbs-cmtime), in one soft-RoCE VM boot: PERF_CMTIME_CONNS
# connections a run, PERF_CMTIME_RUNS runs of each variant, alternately:
# C's client and server, hand's (Dial, Accept, Disconnect, Close), hand's
# with one PD and CQ for all connections (-shared), and a client written on
# generated/rdmacm, cmtime's calls with nothing of hand's (-layer raw),
# and one on hand's step methods (-layer step), both against C's server,
# and C's client against a server on generated/rdmacm (rawsrv: the control
# for hand's server). Prints per step the median us per connection (the
# step's wall time for all of them over their number) and the ratio to
# C's, then each server's CPU time per connection (from when it listens
# to its exit). hand.Dial does create id to create qp in one call,
# so its row "resolve+qp" stands against the sum of C's four. Real time on
# the VM's 2 vCPUs: a few minutes.
PERF_CMTIME_CONNS ?= 100
PERF_CMTIME_RUNS ?= 5

.PHONY: perf-cmtime

perf-cmtime:
	@set -e; \
	dir=$$(mktemp -d "$(DEMO_TMPDIR)/goverbs-cmtime.XXXXXX"); \
	trap 'rm -rf "$$dir"' EXIT; \
	$(GO) build -o "$$dir/rxevm" ./internal/cmd/rxevm; \
	$(GO) build -o "$$dir/goverbs-cmtime" ./cmd/goverbs-cmtime; \
	echo "perf-cmtime: booting the soft-RoCE VM; cmtime and goverbs-cmtime, $(PERF_CMTIME_CONNS) connections, $(PERF_CMTIME_RUNS) runs each"; \
	"$$dir/rxevm" $(RXEVM_FLAGS) $(PERF_RXEVM_FLAGS) -timeout 30m -- \
		"$$dir/goverbs-cmtime" -compare -runs $(PERF_CMTIME_RUNS) -c $(PERF_CMTIME_CONNS) -timeout 25m
