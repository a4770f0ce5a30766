package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// profileFile is where runProfile writes the CPU profile of side ("server"
// or "client") for a row: DIR/<mode>-<size>[-e]-<side>.prof, -e for rows
// waiting for completion events, so that one directory can hold both kinds.
func (o options) profileFile(mode string, size int, side string) string {
	events := ""
	if o.events {
		events = "-e"
	}
	return filepath.Join(o.profile, mode+"-"+strconv.Itoa(size)+events+"-"+side+".prof")
}

// serverLoops says whether goverbs-perf's server runs a loop of its own in
// mode: it receives in send_bw and answers in send_lat, where in write_bw
// and read_bw the client's RDMA reaches its memory without it.
func serverLoops(mode string) bool { return mode == "send_bw" || latMode(mode) }

// runProfile runs goverbs-perf once a row, the client and, where it runs a
// loop (serverLoops), the server each writing a CPU profile of its timed
// part (goverbs-perf -cpuprofile) to o.profile, and prints each client's
// rate. perftest does not run: pprof sees Go code only, and charges all
// that happens under a cgo call (C, and the kernel's work inside it) to
// runtime.cgocall. It samples at 100 Hz of the process's CPU time, which
// is why make perf-profile runs ten times perf-compare's messages.
func runProfile(o options) error {
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return err
	}
	port := o.port
	for _, mode := range o.modes {
		for _, size := range o.sizes {
			iters := o.iters(mode, size)
			extra := sideArgs{client: []string{"-cpuprofile", o.profileFile(mode, size, "client")}}
			if serverLoops(mode) {
				extra.server = []string{"-cpuprofile", o.profileFile(mode, size, "server")}
			}
			r, err := pair(mode, o.perf, o.addr, o.toolArgs("go", mode, size, iters), extra, port, "")
			if err != nil {
				return fmt.Errorf("goverbs-perf %s %d: %w", mode, size, err)
			}
			port++
			fmt.Printf("profiled %-8s %6d B, %7d messages: %.0f msg/s\n", mode, size, iters, r.msgRate)
		}
	}
	return nil
}
