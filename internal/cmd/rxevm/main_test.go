package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-smp", "1", "-env", "A=b=c", "--", "go", "test", "-v"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.smp != 1 || o.timeout != 15*time.Minute || o.mem != "2G" || o.cacheDir != "/var/cache/goverbs-rxevm" || o.root != "/" ||
		!slices.Equal(o.env, []string{"A=b=c"}) || !slices.Equal(o.command, []string{"go", "test", "-v"}) {
		t.Errorf("parseFlags gave %+v", o)
	}
	for _, args := range [][]string{
		{},                                    // no command
		{"-setup-only", "--", "true"},         // setup takes none
		{"-smp", "0", "--", "true"},           // no CPU
		{"-timeout", "0s", "--", "true"},      // no time
		{"-env", "NOEQUALS", "--", "true"},    // not KEY=VALUE
		{"-root", "roots/sid", "--", "true"},  // relative
		{"-setup-root", "sid", "--", "true"},  // setup takes none
		{"-setup-root", "sid", "-setup-only"}, // one setup at a time
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
	if _, err := parseFlags([]string{"-setup-only"}, io.Discard); err != nil {
		t.Errorf("parseFlags(-setup-only): %v", err)
	}
	if o, err := parseFlags([]string{"-setup-root", "trixie"}, io.Discard); err != nil || o.setupRoot != "trixie" {
		t.Errorf("parseFlags(-setup-root trixie): %+v, %v", o, err)
	}
	if o, err := parseFlags([]string{"-plugin", "/p.so,out=/s", "-kernel-args", "tsc=reliable", "--", "true"}, io.Discard); err != nil ||
		o.plugin != "/p.so,out=/s" || o.kernelArgs != "tsc=reliable" {
		t.Errorf("parseFlags(-plugin, -kernel-args): %+v, %v", o, err)
	}
	if o, err := parseFlags([]string{"-root", "/var/cache/r/sid/", "--", "true"}, io.Discard); err != nil || o.root != "/var/cache/r/sid" {
		t.Errorf("parseFlags(-root /var/cache/r/sid/): root %q, %v", o.root, err)
	}
}

func TestAbbreviate(t *testing.T) {
	long := strings.Repeat("x", 99) + "é" + "tail"
	for in, want := range map[string]string{
		"go test -v":             "go test -v",
		"sh -c 'a\nb'":           "sh -c 'a...",
		long:                     strings.Repeat("x", 99) + "...",
		strings.Repeat("y", 100): strings.Repeat("y", 100),
	} {
		if got := abbreviate(in); got != want {
			t.Errorf("abbreviate(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBoot boots a real guest: about 10-20 s under TCG, more on a loaded
// machine, plus a one-time download of the kernel package. With
// RXEVM_BOOT_ROOT=DIR the guest's root is DIR (rxevm -setup-root's output).
func TestBoot(t *testing.T) {
	if os.Getenv("RXEVM_BOOT_TEST") != "1" {
		t.Skip("boots a qemu VM (10-20 s, root, a one-time kernel download): set RXEVM_BOOT_TEST=1 to run it")
	}
	script := `cat /sys/class/infiniband/rxe0/ports/1/state /sys/class/infiniband/rxe0/ports/1/gids/1
echo "env: $RXE_DEVICE $RXE_GID_INDEX $RXE_ADDR $GOVERBS_IN_VM $HOME"
echo "memlock: $(ulimit -l)"
echo "cwd: $(pwd)"
echo back to the host > written.txt
exit 3`
	args := []string{"-timeout", "5m", "--", "sh", "-c", script}
	if root := os.Getenv("RXEVM_BOOT_ROOT"); root != "" {
		args = append([]string{"-root", root}, args...)
	}
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.workdir = t.TempDir() // under /tmp, which the guest covers with a tmpfs: the share must still win
	var out, log strings.Builder
	start := time.Now()
	code, err := run(context.Background(), o, &out, &log)
	t.Logf("boot to exit %v\n%s%s", time.Since(start).Round(time.Millisecond), out.String(), log.String())
	if err != nil || code != 3 {
		t.Fatalf("run = %d, %v; want 3 (the command's status), nil", code, err)
	}
	for _, want := range []string{
		"4: ACTIVE\n",
		"0000:0000:0000:0000:0000:ffff:c000:0201\n", // ::ffff:192.0.2.1
		"env: rxe0 1 192.0.2.1 1 /tmp\n",
		"memlock: unlimited\n",
		"cwd: " + o.workdir + "\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("guest output lacks %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(o.workdir, "written.txt")); err != nil || string(b) != "back to the host\n" {
		t.Errorf("file written in the guest's working directory: %q, %v", b, err)
	}
}
