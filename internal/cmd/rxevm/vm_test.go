package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseExitMarker(t *testing.T) {
	const m = "rxevm-exit-abc="
	for _, c := range []struct {
		line   string
		before string
		status int
		ok     bool
	}{
		{"rxevm-exit-abc=0", "", 0, true},
		{"rxevm-exit-abc=255", "", 255, true},
		{"rxevm-exit-abc=3 trailing", "", 3, true},
		{"no newline at endrxevm-exit-abc=1", "no newline at end", 1, true},
		{"rxevm-exit-abc=256", "", 0, false},
		{"rxevm-exit-abc=", "", 0, false},
		{"rxevm-exit-abc=x", "", 0, false},
		{"rxevm-exit-other=0", "", 0, false},
		{"plain output", "", 0, false},
	} {
		before, status, ok := parseExitMarker(c.line, m)
		if before != c.before || status != c.status || ok != c.ok {
			t.Errorf("parseExitMarker(%q) = %q, %d, %v; want %q, %d, %v",
				c.line, before, status, ok, c.before, c.status, c.ok)
		}
	}
}

func TestConsole(t *testing.T) {
	in := "\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2-debian-1.16.2-1)\r\n" +
		"Booting from ROM..\r\n" +
		"[    0.032000] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\r\n" +
		"rxevm-ready-n1\r\n" +
		"hello\r\n" +
		"SeaBIOS is mentioned by the command\r\n" +
		"\r\n" +
		"last words without newlinerxevm-exit-n1=7\r\n" +
		"[    5.003099] reboot: Power down\r\n"
	var out strings.Builder
	ready := 0
	c := &console{out: &out, readyMarker: "rxevm-ready-n1", exitMarker: "rxevm-exit-n1=", onReady: func() { ready++ }}
	if err := c.copyFrom(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	want := "hello\nSeaBIOS is mentioned by the command\n\nlast words without newline\n"
	if out.String() != want {
		t.Errorf("console output %q, want %q", out.String(), want)
	}
	if !c.exited || c.status != 7 || ready != 1 {
		t.Errorf("exited %v status %d ready %d; want true 7 1", c.exited, c.status, ready)
	}
}

func TestConsoleWithoutExitMarker(t *testing.T) {
	var out strings.Builder
	c := &console{out: &out, readyMarker: "r-n", exitMarker: "e-n="}
	if err := c.copyFrom(strings.NewReader("Kernel panic - not syncing\nend without newline")); err != nil {
		t.Fatal(err)
	}
	if c.exited {
		t.Error("a console without the exit marker counted as exited")
	}
	if want := "Kernel panic - not syncing\nend without newline\n"; out.String() != want {
		t.Errorf("console output %q, want %q", out.String(), want)
	}
}

func TestQEMUArgs(t *testing.T) {
	v := vm{qemu: "qemu", arch: amd64, kernel: "/k", initrd: "/i", root: "/", workdir: "/w,x", mem: "1G", smp: 3, netArgs: []string{"-nic", "none"}, quiet: true}
	args := v.args()
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"-accel tcg", "-m 1G", "-smp 3", "-no-reboot", "-kernel /k", "-initrd /i",
		"-append console=ttyS0 quiet panic=-1",
		"local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"local,path=/w,,x,mount_tag=work,security_model=none,multidevs=remap",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("qemu args lack %q: %q", want, args)
		}
	}
	if !slices.Equal(args[len(args)-2:], []string{"-nic", "none"}) {
		t.Errorf("qemu args do not end with the network's: %q", args)
	}
	if strings.Contains(joined, "icount") {
		t.Errorf("qemu args count instructions unasked: %q", joined)
	}
	v.icount = "shift=3,sleep=off"
	if joined := strings.Join(v.args(), " "); !strings.Contains(joined, "-icount shift=3,sleep=off -nic none") {
		t.Errorf("qemu args lack -icount before the network's: %q", joined)
	}
	if strings.Contains(joined, "-plugin") {
		t.Errorf("qemu args load a plugin unasked: %q", joined)
	}
	v.plugin = "/tmp/insncount.so,out=/tmp/snaps"
	if joined := strings.Join(v.args(), " "); !strings.Contains(joined, "-plugin /tmp/insncount.so,out=/tmp/snaps -nic none") {
		t.Errorf("qemu args lack -plugin before the network's: %q", joined)
	}
	v.root = "/var/cache/roots/a,b"
	if joined := strings.Join(v.args(), " "); !strings.Contains(joined, "local,path=/var/cache/roots/a,,b,mount_tag=hostroot,security_model=none,readonly=on,") {
		t.Errorf("qemu args do not export the root read-only: %q", joined)
	}
	if slices.Contains(args, "kvm") || strings.Contains(joined, "accel kvm") || strings.Contains(joined, "enable-kvm") {
		t.Errorf("qemu args ask for KVM, with which this kernel hangs: %q", args)
	}
}

func TestKernelArgs(t *testing.T) {
	v := vm{arch: amd64, quiet: true}
	if got := v.cmdline(); got != "console=ttyS0 quiet panic=-1" {
		t.Errorf("cmdline %q", got)
	}
	v.kernelArgs = "clocksource=tsc tsc=reliable"
	if got := v.cmdline(); got != "console=ttyS0 quiet panic=-1 clocksource=tsc tsc=reliable" {
		t.Errorf("cmdline with -kernel-args: %q", got)
	}
	v.quiet = false
	if got := v.cmdline(); got != "console=ttyS0 panic=-1 clocksource=tsc tsc=reliable" {
		t.Errorf("verbose cmdline with -kernel-args: %q", got)
	}
}

// fakeQEMU writes a shell script that stands in for qemu: it ignores its
// arguments and runs body.
func fakeQEMU(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "qemu")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type fakeRun struct {
	code     int
	err      error
	out, log string
}

// runFake runs the command "my-cmd 'an arg'" in a fake qemu.
func runFake(t *testing.T, body string, timeout time.Duration) fakeRun {
	t.Helper()
	plan := testPlan("/w", "my-cmd", "an arg")
	var out, log strings.Builder
	v := vm{qemu: fakeQEMU(t, body), mem: "1G", smp: 1}
	code, err := v.run(context.Background(), timeout, plan, &out, &host{log: &log})
	return fakeRun{code, err, out.String(), log.String()}
}

func TestRunReportsGuestStatus(t *testing.T) {
	r := runFake(t, `printf 'SeaBIOS (version x)\r\nrxevm-ready-0123456789abcdef\r\nok\r\nrxevm-exit-0123456789abcdef=42\r\n'`, time.Minute)
	if r.code != 42 || r.err != nil {
		t.Errorf("run = %d, %v; want 42, nil", r.code, r.err)
	}
	if r.out != "ok\n" {
		t.Errorf("output %q, want %q", r.out, "ok\n")
	}
	if !strings.Contains(r.log, "exit status 42 (my-cmd 'an arg')") {
		t.Errorf("summary %q does not give the status and command", r.log)
	}
}

func TestRunWithoutExitMarker(t *testing.T) {
	r := runFake(t, `echo 'rxevm: guest setup failed: mount -t 9p hostroot /host'`, time.Minute)
	if r.code != exitFailure || r.err == nil || !strings.Contains(r.err.Error(), "without reporting the exit status of my-cmd 'an arg'") {
		t.Errorf("run = %d, %v; want %d and an error naming the command", r.code, r.err, exitFailure)
	}
	if !strings.Contains(r.out, "guest setup failed") {
		t.Errorf("the guest's last words %q were not shown", r.out)
	}
}

func TestRunTimeout(t *testing.T) {
	start := time.Now()
	r := runFake(t, `echo booting; exec sleep 60`, 300*time.Millisecond)
	if r.code != exitTimeout || r.err == nil || !strings.Contains(r.err.Error(), "timed out after 300ms running my-cmd 'an arg'") {
		t.Errorf("run = %d, %v; want %d and a timeout error naming the command", r.code, r.err, exitTimeout)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("run took %v to give up after a 300ms timeout", d)
	}
}

func TestRunQEMUFails(t *testing.T) {
	r := runFake(t, `echo 'qemu-system-x86_64: -virtfs: bad option' >&2; exit 1`, time.Minute)
	if r.code != exitFailure || r.err == nil {
		t.Errorf("run = %d, %v; want %d and an error", r.code, r.err, exitFailure)
	}
}

func TestRunPanicBeforeCommand(t *testing.T) {
	r := runFake(t, `echo '[    2.060503] Kernel panic - not syncing: Fatal exception in interrupt'`, time.Minute)
	if r.code != exitFailure || !errors.Is(r.err, errPanicBeforeCommand) || !strings.Contains(r.err.Error(), "my-cmd 'an arg'") {
		t.Errorf("run = %d, %v; want %d and errPanicBeforeCommand naming the command", r.code, r.err, exitFailure)
	}
	// Once the command has started, a panic is the command's business.
	r = runFake(t, `printf 'rxevm-ready-0123456789abcdef\nKernel panic - not syncing: Attempted to kill init!\n'`, time.Minute)
	if r.err == nil || errors.Is(r.err, errPanicBeforeCommand) {
		t.Errorf("a panic after the ready marker: run = %d, %v; want an error that is not errPanicBeforeCommand", r.code, r.err)
	}
}

// TestRunGuestBootsAgainAfterBootPanic runs fake guests that count their
// boots in a file: a kernel panic before the command gets one fresh guest,
// and nothing else does.
func TestRunGuestBootsAgainAfterBootPanic(t *testing.T) {
	const (
		panics = `echo 'Kernel panic - not syncing: Fatal exception in interrupt'`
		passes = `printf 'rxevm-ready-0123456789abcdef\nok\nrxevm-exit-0123456789abcdef=0\n'`
	)
	for _, tc := range []struct {
		name      string
		boots     []string // what each boot prints, the last one repeated
		wantBoots int
		wantCode  int
		wantErr   error // nil: no error
		wantLog   string
	}{
		{"panic, then the command", []string{panics, passes}, 2, 0, nil, "booting a fresh guest (attempt 2 of 2)"},
		{"panic every time", []string{panics}, 2, exitFailure, errPanicBeforeCommand, "attempt 2 of 2"},
		{"setup fails", []string{`echo 'rxevm: guest setup failed: insmod /lib/modules/rdma_rxe.ko'`}, 1, exitFailure, nil, ""},
		{"panic in the command", []string{`printf 'rxevm-ready-0123456789abcdef\nKernel panic - not syncing\n'`}, 1, exitFailure, nil, ""},
		{"the command fails", []string{`printf 'rxevm-ready-0123456789abcdef\nrxevm-exit-0123456789abcdef=3\n'`}, 1, 3, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			count := filepath.Join(dir, "boots")
			body := `n=$(($(cat ` + count + ` 2>/dev/null || echo 0) + 1)); echo $n > ` + count + "\n"
			for i, b := range tc.boots {
				if i == len(tc.boots)-1 {
					body += b + "\n"
				} else {
					body += fmt.Sprintf("if [ $n -eq %d ]; then %s; exit 0; fi\n", i+1, b)
				}
			}
			qemu := fakeQEMU(t, body)
			var out, log strings.Builder
			prepared := 0
			code, err := runGuest(context.Background(), &host{log: &log}, time.Minute, &out, func() (guest, error) {
				prepared++
				initrd := filepath.Join(dir, fmt.Sprintf("initrd%d", prepared))
				if err := os.WriteFile(initrd, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				return guest{plan: testPlan("/w", "my-cmd"), vm: vm{qemu: qemu, initrd: initrd, mem: "1G", smp: 1}}, nil
			})
			b, _ := os.ReadFile(count)
			if got := strings.TrimSpace(string(b)); got != strconv.Itoa(tc.wantBoots) || prepared != tc.wantBoots {
				t.Errorf("booted %s guests, prepared %d; want %d", got, prepared, tc.wantBoots)
			}
			if code != tc.wantCode {
				t.Errorf("status %d, want %d", code, tc.wantCode)
			}
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("error %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && errors.Is(err, errPanicBeforeCommand):
				t.Errorf("error %v on the last boot", err)
			case tc.wantCode == 0 && err != nil:
				t.Errorf("error %v, want none", err)
			}
			if tc.wantLog != "" && !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("log %q lacks %q", log.String(), tc.wantLog)
			}
			if tc.wantLog == "" && strings.Contains(log.String(), "fresh guest") {
				t.Errorf("log %q: booted again", log.String())
			}
			for i := 1; i <= prepared; i++ {
				if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("initrd%d", i))); !os.IsNotExist(err) {
					t.Errorf("initrd %d left behind: %v", i, err)
				}
			}
		})
	}
}
