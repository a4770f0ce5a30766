package main

import (
	"bufio"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// vm is one qemu guest: Debian's kernel, our initramfs, the host's root
// filesystem read-only and the working directory read-write over 9p.
type vm struct {
	qemu    string // qemu-system-x86_64
	kernel  string
	initrd  string
	workdir string
	mem     string
	smp     int
	netArgs []string // the network's NICs; "-nic none" for a single host
	quiet   bool     // keep the kernel's boot messages off the console
}

// qemuOptValue escapes a value for a qemu -opt key=value list, where a comma
// ends the value unless doubled.
func qemuOptValue(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// args returns qemu's command line. TCG, not KVM: a KVM guest of this kernel
// hangs after "Probing EDD" on these machines. -nodefaults drops the VGA,
// NIC and drives nobody asked for; the serial port on stdio is the console.
// panic=-1 with -no-reboot makes a crashing guest end qemu at once.
func (v vm) args() []string {
	a := []string{
		"-accel", "tcg",
		"-m", v.mem,
		"-smp", strconv.Itoa(v.smp),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-serial", "stdio",
		"-no-reboot",
		"-kernel", v.kernel,
		"-initrd", v.initrd,
		"-append", v.cmdline(),
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + qemuOptValue(v.workdir) + ",mount_tag=work,security_model=none,multidevs=remap",
	}
	return append(a, v.netArgs...)
}

func (v vm) cmdline() string {
	if v.quiet {
		return "console=ttyS0 quiet panic=-1"
	}
	return "console=ttyS0 panic=-1"
}

// firmwareNoise matches console lines from the BIOS and option ROMs, which
// say nothing about the command.
var firmwareNoise = regexp.MustCompile(`^(SeaBIOS \(version|iPXE|Booting from ROM|Booting from Hard Disk|Press Ctrl-B)`)

// ansiEscape matches the terminal control sequences the firmware writes
// (clear screen, cursor moves) before the kernel takes the console over.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)`)

// console turns the guest's serial output into the command's output: it
// strips carriage returns and firmware noise and takes out the markers that
// init prints before and after the command.
type console struct {
	out         io.Writer
	readyMarker string
	exitMarker  string
	onReady     func() // called when the command starts, may be nil
	verbose     bool   // keep the guest's power-off messages after the exit marker

	status int
	exited bool // an exit marker was seen: status is the command's
}

// line handles one line of console output, without its newline.
func (c *console) line(s string) error {
	s = strings.ReplaceAll(s, "\r", "")
	s = ansiEscape.ReplaceAllString(s, "")
	if firmwareNoise.MatchString(s) || c.exited && !c.verbose {
		return nil
	}
	// A marker is printed on a line of its own but may follow output that
	// did not end with a newline; that output is kept.
	if before, _, ok := strings.Cut(s, c.readyMarker); ok {
		if c.onReady != nil {
			c.onReady()
		}
		return c.print(before)
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
