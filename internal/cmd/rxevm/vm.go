package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// vm is one qemu guest: Debian's kernel, our initramfs, a root filesystem
// (the host's / by default) read-only and the working directory read-write
// over 9p.
type vm struct {
	qemu       string // the path of arch.qemu
	arch       guestArch
	kernel     string
	initrd     string
	root       string // the host directory the guest chroots into
	workdir    string
	mem        string
	smp        int
	icount     string     // qemu's -icount value; "" for real time
	plugin     string     // qemu's -plugin value; "" for none
	kernelArgs string     // appended to the kernel command line
	netArgs    []string   // the network's NICs; "-nic none" for a single host
	files      []*os.File // descriptors qemu inherits as 3, 4, ... (netArgs name them)
	quiet      bool       // keep the kernel's boot messages off the console

	// onKillPeer, when set, is called when the command prints the plan's
	// killPeerMarker on a line (two-host mode).
	onKillPeer func()
}

// Causes of a guest's end that are not its own doing, for run's context.
var (
	// errPowerCut: the other host's command asked for this host to die,
	// as a peer that crashes or loses power does (fault tests).
	errPowerCut = errors.New("power cut at the other host's request")
	// errPeerEnded: the other host ended and this one outlived it by more
	// than the grace period.
	errPeerEnded = errors.New("the other host ended long ago")
)

// errPanicBeforeCommand: the guest's kernel panicked before init started
// the command. Nothing of the command ran, so booting a fresh guest is
// safe; TCG provokes such panics now and then (an int3 oops in a
// secondary vCPU's clock while the kernel patches its own code).
var errPanicBeforeCommand = errors.New("the guest's kernel panicked before the command started")

// kernelPanic is how every kernel panic begins on the console.
const kernelPanic = "Kernel panic - not syncing"

// qemuOptValue escapes a value for a qemu -opt key=value list, where a comma
// ends the value unless doubled.
func qemuOptValue(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// args returns qemu's command line. TCG, not KVM: a KVM guest of this kernel
// hangs after "Probing EDD" on these machines. -nodefaults drops the VGA,
// NIC and drives nobody asked for; the serial port on stdio is the console.
// panic=-1 with -no-reboot makes a crashing guest end qemu at once.
func (v vm) args() []string {
	a := append([]string{"-accel", "tcg"}, v.arch.board...)
	a = append(a,
		"-m", v.mem,
		"-smp", strconv.Itoa(v.smp),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-serial", "stdio",
		"-no-reboot",
		"-kernel", v.kernel,
		"-initrd", v.initrd,
		"-append", v.cmdline(),
		"-virtfs", "local,path="+qemuOptValue(v.root)+",mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path="+qemuOptValue(v.workdir)+",mount_tag=work,security_model=none,multidevs=remap",
	)
	if v.icount != "" {
		a = append(a, "-icount", v.icount)
	}
	if v.plugin != "" {
		a = append(a, "-plugin", v.plugin)
	}
	return append(a, v.netArgs...)
}

func (v vm) cmdline() string {
	c := "console=" + v.arch.console
	if v.quiet {
		c += " quiet"
	}
	c += " panic=-1"
	if v.kernelArgs != "" {
		c += " " + v.kernelArgs
	}
	return c
}

// consoleNoise matches console lines that say nothing about the command:
// the BIOS's and option ROMs', and a kernel complaint that TCG's timer
// emulation provokes now and then, harmless and not a bug of ours.
var consoleNoise = regexp.MustCompile(`^(SeaBIOS \(version|iPXE|Booting from ROM|Booting from Hard Disk|Press Ctrl-B)` +
	`|^\[ *[0-9.]+\] \.\.MP-BIOS bug: 8254 timer not connected to IO-APIC$`)

// ansiEscape matches the terminal control sequences the firmware writes
// (clear screen, cursor moves) before the kernel takes the console over.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)`)

// console turns the guest's serial output into the command's output: it
// strips carriage returns and noise and takes out the markers that
// init prints before and after the command.
type console struct {
	out         io.Writer
	readyMarker string
	exitMarker  string
	onReady     func() // called when the command starts, may be nil
	verbose     bool   // keep the guest's power-off messages after the exit marker
	killMarker  string // a line with it calls onKill; "" for none
	onKill      func()

	status   int
	exited   bool // an exit marker was seen: status is the command's
	panicked bool // the kernel panicked
}

// line handles one line of console output, without its newline.
func (c *console) line(s string) error {
	s = strings.ReplaceAll(s, "\r", "")
	s = ansiEscape.ReplaceAllString(s, "")
	if consoleNoise.MatchString(s) || c.exited && !c.verbose {
		return nil
	}
	if strings.Contains(s, kernelPanic) {
		c.panicked = true
	}
	// A marker is printed on a line of its own but may follow output that
	// did not end with a newline; that output is kept.
	if before, _, ok := strings.Cut(s, c.readyMarker); ok {
		if c.onReady != nil {
			c.onReady()
		}
		return c.print(before)
	}
	if c.killMarker != "" && strings.Contains(s, c.killMarker) {
		c.onKill()
		return nil
	}
	if before, status, ok := parseExitMarker(s, c.exitMarker); ok {
		c.status, c.exited = status, true
		return c.print(before)
	}
	_, err := io.WriteString(c.out, s+"\n")
	return err
}

func (c *console) print(s string) error {
	if s == "" {
		return nil
	}
	_, err := io.WriteString(c.out, s+"\n")
	return err
}

// copyFrom reads console output until EOF, writing each line as it arrives.
func (c *console) copyFrom(r io.Reader) error {
	br := bufio.NewReader(r)
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			if werr := c.line(strings.TrimSuffix(s, "\n")); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parseExitMarker finds marker followed by a decimal exit status (0-255) in
// line and returns what came before the marker and the status.
func parseExitMarker(line, marker string) (before string, status int, ok bool) {
	before, rest, found := strings.Cut(line, marker)
	if !found {
		return "", 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil || n > 255 {
		return "", 0, false
	}
	return before, n, true
}

// startLocked starts cmd from a goroutine locked to its thread, so that
// the thread, whose end sends cmd's Pdeathsig, is not one that a locked
// goroutine's exit would end: it unlocks after the start, and Go keeps
// the thread.
func startLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

// run boots the guest, copies its console to stdout and returns the
// command's exit status, killing qemu when timeout expires.
func (v vm) run(ctx context.Context, timeout time.Duration, plan guestPlan, stdout io.Writer, h *host) (int, error) {
	what := shellJoin(plan.Command)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.qemu, v.args()...)
	// qemu dies with rxevm, even by SIGKILL (see startLocked): a VM left
	// running would hold the CPUs, with no timeout left to end it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = h.log
	cmd.ExtraFiles = v.files
	cmd.WaitDelay = 5 * time.Second // the console pipe must not outlive a killed qemu for long
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return exitFailure, err
	}
	start := time.Now()
	var ready time.Time
	con := &console{
		out:         stdout,
		readyMarker: plan.readyMarker(),
		exitMarker:  plan.exitMarker(),
		onReady: func() {
			ready = time.Now()
			// qemu read the initrd before the guest started: remove it now,
			// so that not even a SIGKILL of rxevm leaves it behind.
			os.Remove(v.initrd)
		},
		verbose: h.verbose,
	}
	if v.onKillPeer != nil {
		con.killMarker, con.onKill = plan.killPeerMarker(), v.onKillPeer
	}
	if err := startLocked(cmd); err != nil {
		return exitFailure, err
	}
	copyErr := con.copyFrom(pipe)
	if copyErr != nil {
		cmd.Process.Kill() // nobody reads its console any more
	}
	waitErr := cmd.Wait()
	end := time.Now()

	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errPowerCut):
		h.logf("%s after %.1fs; qemu killed (%s)", errPowerCut, end.Sub(start).Seconds(), abbreviate(what))
		return 0, nil
	case errors.Is(cause, errPeerEnded):
		return exitTimeout, fmt.Errorf("still running %s well after the other host ended; qemu killed", what)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return exitTimeout, fmt.Errorf("timed out after %v running %s; qemu killed (raise -timeout if it was just slow)", timeout, what)
	case ctx.Err() != nil:
		return exitFailure, fmt.Errorf("interrupted while running %s; qemu killed", what)
	case copyErr != nil:
		return exitFailure, fmt.Errorf("reading the guest console: %w", copyErr)
	case waitErr != nil:
		return exitFailure, fmt.Errorf("qemu: %w", waitErr)
	case !con.exited && con.panicked && ready.IsZero():
		return exitFailure, fmt.Errorf("%w (%s; see its output above)", errPanicBeforeCommand, what)
	case !con.exited:
		return exitFailure, fmt.Errorf("the guest stopped without reporting the exit status of %s: it crashed, hung up or failed to set up (see its output above)", what)
	}
	if ready.IsZero() {
		ready = start // no ready marker: count it all as the command's time
	}
	h.logf("boot %.1fs, command %.1fs, exit status %d (%s)",
		ready.Sub(start).Seconds(), end.Sub(ready).Seconds(), con.status, abbreviate(what))
	return con.status, nil
}

// abbreviate shortens a command line to its first line and 100 bytes, for
// a one-line summary.
func abbreviate(s string) string {
	const limit = 100
	first, _, multiline := strings.Cut(s, "\n")
	if len(first) > limit {
		n := limit
		for !utf8.RuneStart(first[n]) {
			n--
		}
		first, multiline = first[:n], true
	}
	if multiline {
		return first + "..."
	}
	return first
}
