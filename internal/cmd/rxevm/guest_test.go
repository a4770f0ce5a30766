package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sh runs a script with the host's /bin/sh, the shell that runs the
// command script in the guest's chroot.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

var awkwardWords = []string{
	"", "plain", "-test.v", "a b", "it's", `"double"`, `back\slash`, "$HOME", "`date`", "$(date)",
	"semi;colon", "a&&b", "pipe|", "glob*?[x]", "~tilde", "new\nline", "tab\there", "x=y", "#hash", "''", "é",
}

// Whatever the words, the shell must split the joined line back into
// exactly them.
func TestShellJoinRoundTrip(t *testing.T) {
	out := sh(t, "", `printf '%s\0' `+shellJoin(awkwardWords))
	got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if !slices.Equal(got, awkwardWords) {
		t.Errorf("round trip through sh:\n got %q\nwant %q", got, awkwardWords)
	}
}

// Quoting twice is what init does (the command script inside a chroot
// argument): it must survive two shells.
func TestShellQuoteNested(t *testing.T) {
	inner := "printf '%s\\0' " + shellJoin(awkwardWords)
	out := sh(t, "", "/bin/sh -c "+shellQuote(inner))
	got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if !slices.Equal(got, awkwardWords) {
		t.Errorf("round trip through two shells:\n got %q\nwant %q", got, awkwardWords)
	}
}

func TestShellQuoteLeavesSafeWordsBare(t *testing.T) {
	for _, w := range []string{"rxe0", "/usr/sbin/ip", "192.0.2.1/24", "a,b:c@d%e+f"} {
		if q := shellQuote(w); q != w {
			t.Errorf("shellQuote(%q) = %s, want it bare", w, q)
		}
	}
	for _, w := range []string{"", "x=y", "~", "a b"} {
		if q := shellQuote(w); q == w {
			t.Errorf("shellQuote(%q) left it bare", w)
		}
	}
}

func TestGuestPath(t *testing.T) {
	for _, c := range []struct{ host, want string }{
		{"", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		{"/usr/local/go/bin:/usr/bin:/bin", "/usr/local/go/bin:/usr/bin:/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin"},
		{"bin:.:/opt/x::/opt/x", "/opt/x:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	} {
		if got := guestPath(c.host); got != c.want {
			t.Errorf("guestPath(%q) = %q, want %q", c.host, got, c.want)
		}
	}
}

// hostTools are ip and rdma where Debian 12, the host, has them.
var hostTools = guestTools{ip: "/usr/sbin/ip", rdma: "/usr/bin/rdma"}

func testPlan(workdir string, command ...string) guestPlan {
	return guestPlan{
		Modules: []string{"crc32_generic.ko", "virtio.ko", "9p.ko"},
		Workdir: workdir,
		Net:     vethNetwork(hostTools),
		Env:     guestEnv(vethNetwork(hostTools), []string{"EXTRA=it's"}),
		Command: command,
		Nonce:   "0123456789abcdef",
	}
}

func TestInitScript(t *testing.T) {
	script, err := initScript(testPlan("/work/my dir", "go", "test", "-run", "X|Y"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#!/bin/busybox sh\n",
		"step insmod /lib/modules/crc32_generic.ko\nstep insmod /lib/modules/virtio.ko\nstep insmod /lib/modules/9p.ko\n",
		"hostroot /host\n",
		"step mount -t tmpfs -o mode=1777 tmp /host/tmp\n",
		"work '/host/work/my dir'\n",
		"step chroot /host /usr/sbin/ip link add veth0 type veth peer name veth1\n",
		"step chroot /host /usr/bin/rdma link add rxe0 type rxe netdev veth0\n",
		"step chroot /host /usr/bin/rdma link add rxe1 type rxe netdev veth1\n",
		"for dev in rxe0 rxe1; do",
		"echo rxevm-ready-0123456789abcdef\n",
		" 'GOVERBS_IN_VM=1' 'RXE_DEVICE=rxe0' 'RXE_GID_INDEX=1' 'RXE_ADDR=192.0.2.1' 'RXE_NETDEV=veth0' 'EXTRA=it'\\''s' /bin/sh -c ",
		`/bin/sh -c 'ulimit -l unlimited && cd '\''/work/my dir'\'' && exec go test -run '\''X|Y'\''' </dev/null`,
		"echo 'rxevm-exit-0123456789abcdef='$?\npoweroff -f\n",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("init script lacks %q:\n%s", want, script)
		}
	}
	// The modules must be loaded before anything mounts 9p.
	if strings.Index(script, "insmod /lib/modules/9p.ko") > strings.Index(script, "mount -t 9p") {
		t.Errorf("9p mounted before its module is loaded:\n%s", script)
	}
}

// The rendered init must at least parse, in busybox's shell if there is one.
func TestInitScriptParses(t *testing.T) {
	script, err := initScript(testPlan("/w", "sh", "-c", "echo 'a b' \"$HOME\""))
	if err != nil {
		t.Fatal(err)
	}
	shells := [][]string{{"/bin/sh", "-n"}}
	if _, err := os.Stat("/bin/busybox"); err == nil {
		shells = append(shells, []string{"/bin/busybox", "sh", "-n"})
	}
	for _, shell := range shells {
		cmd := exec.Command(shell[0], shell[1:]...)
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not parse the init script: %v\n%s\n%s", shell, err, out, script)
		}
	}
}

// The command script runs the command in the working directory with the
// locked-memory limit raised. Where this host lets the test raise it (root
// with CAP_SYS_RESOURCE) all of it is checked for real.
func TestCommandScript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := testPlan(dir, "sh", "-c", `pwd; printf '%s|' "$0" "$1"; echo; ulimit -l`, "arg zero", "$1")
	script := p.commandScript()
	if !strings.HasPrefix(script, "ulimit -l unlimited && ") {
		t.Errorf("command script %s does not raise the locked-memory limit first", script)
	}
	want := dir + "\narg zero|$1|\nunlimited\n"
	if exec.Command("/bin/sh", "-c", "ulimit -l unlimited").Run() != nil {
		t.Log("cannot raise the locked-memory limit here: not checking it")
		script = strings.Replace(script, "ulimit -l unlimited", "true", 1)
		want = dir + "\narg zero|$1|\n"
	}
	got := sh(t, "/", script)
	if !strings.HasPrefix(got, want) {
		t.Errorf("command script %s printed %q, want %q", script, got, want)
	}
}

func TestInitScriptRejects(t *testing.T) {
	for _, p := range []guestPlan{
		testPlan("/", "true"),
		testPlan("relative/dir", "true"),
		testPlan("/w"),
	} {
		if _, err := initScript(p); err == nil {
			t.Errorf("initScript accepted workdir %q, command %q", p.Workdir, p.Command)
		}
	}
}

func TestGuestEnv(t *testing.T) {
	t.Setenv("PATH", "/opt/bin")
	env := guestEnv(vethNetwork(hostTools), []string{"RXE_DEVICE=rxe1"})
	for _, want := range []string{"HOME=/tmp", "GOVERBS_IN_VM=1", "RXE_GID_INDEX=1", "RXE_ADDR=192.0.2.1"} {
		if !slices.Contains(env, want) {
			t.Errorf("guest environment %q lacks %s", env, want)
		}
	}
	if !strings.HasPrefix(env[1], "PATH=/opt/bin:") {
		t.Errorf("guest PATH %s does not start with the caller's", env[1])
	}
	// env(1) keeps the last of two assignments: -env must come last.
	if env[len(env)-1] != "RXE_DEVICE=rxe1" {
		t.Errorf("extra environment is not last: %q", env)
	}
}
