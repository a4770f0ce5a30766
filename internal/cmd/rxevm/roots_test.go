package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRootRecipes(t *testing.T) {
	for _, c := range []struct {
		name, suite string
		want        []string
	}{
		{"bullseye", "bullseye", []string{"libibverbs1", "ibverbs-providers", "librdmacm1", "ibverbs-utils", "rdmacm-utils", "perftest", "iproute2", "libc6-dev", "gcc"}},
		// Debian 13's kernel, which the guest boots, and the busybox that
		// boots it.
		{"trixie", "trixie", []string{"libibverbs1", "ibverbs-providers", "librdmacm1t64", "ibverbs-utils", "rdmacm-utils", "perftest", "iproute2",
			"linux-image-amd64", "busybox-static"}},
		{"sid", "sid", []string{"libibverbs1", "ibverbs-providers", "librdmacm1t64", "ibverbs-utils", "rdmacm-utils", "perftest", "iproute2", "libc6-dev", "gcc",
			"linux-image-amd64", "busybox-static"}},
		{"nordma", "bookworm", []string{"gcc", "libc6-dev", "iproute2"}},
	} {
		r, err := findRootRecipe(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if r.suite != c.suite || !sameSet(r.packages, c.want) {
			t.Errorf("root %s: suite %s, packages %q; want %s, %q", c.name, r.suite, r.packages, c.suite, c.want)
		}
	}
	// The no-rdma-core root must stay without it: nothing of rdma-core's
	// may come in by name.
	r, _ := findRootRecipe("nordma")
	for _, p := range r.packages {
		if strings.Contains(p, "rdma") || strings.Contains(p, "verbs") || p == "perftest" {
			t.Errorf("nordma installs %s", p)
		}
	}
	if _, err := findRootRecipe("bookworm"); err == nil || !strings.Contains(err.Error(), "host's own /") {
		t.Errorf("findRootRecipe(bookworm) = %v; want an error saying the host is bookworm", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The command lines measured in shared/SOFTROCE.md, sid's with its apt
// option, and with the kernel its guest boots and the busybox that boots it.
func TestMmdebstrapArgs(t *testing.T) {
	r, _ := findRootRecipe("sid")
	got := r.mmdebstrapArgs("/d", "http://archive.example/debian")
	want := []string{"--variant=apt", "--include=libibverbs1,ibverbs-providers,ibverbs-utils,rdmacm-utils,perftest,iproute2,librdmacm1t64,libc6-dev,gcc,linux-image-amd64,busybox-static",
		`--aptopt=Acquire::Check-Valid-Until "false"`, "sid", "/d", "http://archive.example/debian"}
	if !slices.Equal(got, want) {
		t.Errorf("mmdebstrap args\n got %q\nwant %q", got, want)
	}
	if s := r.stamp(); strings.Contains(s, "/d") || strings.Contains(s, "example") || !strings.Contains(s, "--include=") {
		t.Errorf("stamp %q must name the recipe but neither directory nor archive", s)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDebianArchiveURI(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"deb822, security and disabled stanzas first", map[string]string{
			"sources.list.d/a-other.sources": "Types: deb\nURIs: https://nodes.example/node\nSuites: nodistro\nComponents: main\n",
			"sources.list.d/debian.sources": "# comment\nTypes: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n\n" +
				"Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n" +
				"Types: deb-src deb\nURIs:\n http://main.example/debian\n http://second.example/debian\n" +
				"# http://snapshot.example/archive/debian/20250520T000000Z\nSuites: bookworm bookworm-updates\nComponents: main\n",
			"sources.list": "deb http://list.example/debian bookworm main\n",
		}, "http://main.example/debian"},
		{"one-line, with options", map[string]string{
			"sources.list":             "# deb http://commented.example/debian bookworm main\ndeb-src http://src.example/debian bookworm main\n",
			"sources.list.d/x.list":    "deb [arch=amd64 signed-by=/k.gpg] http://opts.example/debian trixie main\n",
			"sources.list.d/a.list":    "deb https://packages.example/apt cloud-sdk-bookworm main\n",
			"sources.list.d/n.sources": "Types: deb\nURIs: https://n.example\nSuites: nodistro\n",
		}, "http://opts.example/debian"},
		{"none", map[string]string{
			"sources.list": "deb http://sec.example/debian-security bookworm-security main\n",
		}, ""},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, c.files)
		got, err := debianArchiveURI(dir)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: debianArchiveURI = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// fakeMmdebstrap puts a stand-in for mmdebstrap first on PATH: it records
// its arguments in log and makes a root in its target directory (the
// argument before last), or fails when fail exists.
func fakeMmdebstrap(t *testing.T) (log, fail string) {
	dir := t.TempDir()
	log, fail = filepath.Join(dir, "log"), filepath.Join(dir, "fail")
	writeFiles(t, dir, map[string]string{"bin/mmdebstrap": `#!/bin/sh
echo "$*" >> ` + log + `
[ -e ` + fail + ` ] && { echo "E: no such suite" >&2; exit 1; }
for last; do :; done
for a; do [ "$a" = "$last" ] && break; target=$a; done
mkdir -p "$target/bin" && echo ok > "$target/bin/sh"
`})
	t.Setenv("PATH", filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	return log, fail
}

// lines returns the lines of a file that may not exist yet.
func lines(t *testing.T, file string) []string {
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return slices.DeleteFunc(strings.Split(string(b), "\n"), func(s string) bool { return s == "" })
}

func TestEnsureRoot(t *testing.T) {
	log, fail := fakeMmdebstrap(t)
	cache := t.TempDir()
	archiveCalls := 0
	archive := func() (string, error) { archiveCalls++; return "http://archive.example/debian", nil }
	h := &host{log: io.Discard}
	r, _ := findRootRecipe("trixie")
	ctx := context.Background()

	root, err := h.ensureRoot(ctx, cache, r, archive)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "roots", "trixie"); root != want {
		t.Errorf("root %s, want %s", root, want)
	}
	// Built beside its place, from the archive asked for.
	if calls := lines(t, log); len(calls) != 1 || !strings.HasPrefix(calls[0], "--variant=apt --include=libibverbs1,") ||
		!strings.Contains(calls[0], " trixie "+root+".partial-") || !strings.HasSuffix(calls[0], " http://archive.example/debian") {
		t.Errorf("mmdebstrap calls %q", calls)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("root %s: %v, %v; want a directory others can read (the guest is not root's user)", root, fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "bin/sh")); string(b) != "ok\n" {
		t.Errorf("root lacks what mmdebstrap made")
	}
	if b, _ := os.ReadFile(root + ".stamp"); string(b) != r.stamp() {
		t.Errorf("stamp %q, want %q", b, r.stamp())
	}

	// Cached: no mmdebstrap, no archive look-up.
	if again, err := h.ensureRoot(ctx, cache, r, archive); err != nil || again != root {
		t.Fatalf("second ensureRoot = %s, %v", again, err)
	}
	if n := len(lines(t, log)); n != 1 || archiveCalls != 1 {
		t.Errorf("a cached root ran mmdebstrap %d times, looked the archive up %d times; want once each in all", n, archiveCalls)
	}

	// A changed recipe builds again; a failed build leaves neither half a
	// root nor a stamp that passes for the new recipe.
	r.packages = append(r.packages, "gcc")
	if err := os.WriteFile(fail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ensureRoot(ctx, cache, r, archive); err == nil || !strings.Contains(err.Error(), "no such suite") {
		t.Errorf("a failing mmdebstrap gave %v; want its message", err)
	}
	if partial, _ := filepath.Glob(filepath.Join(cache, "roots", "*.partial-*")); len(partial) > 0 {
		t.Errorf("left behind: %q", partial)
	}
	os.Remove(fail)
	if _, err := h.ensureRoot(ctx, cache, r, archive); err != nil {
		t.Fatal(err)
	}
	if calls := lines(t, log); len(calls) != 3 || !strings.Contains(calls[2], ",gcc trixie ") {
		t.Errorf("after the recipe changed: mmdebstrap calls %q", calls)
	}
	if b, _ := os.ReadFile(root + ".stamp"); string(b) != r.stamp() {
		t.Errorf("stamp %q, want the new recipe's %q", b, r.stamp())
	}

	// No archive, no root.
	other, _ := findRootRecipe("sid")
	noArchive := errors.New("no Debian archive in the apt sources")
	if _, err := h.ensureRoot(ctx, cache, other, func() (string, error) { return "", noArchive }); !errors.Is(err, noArchive) {
		t.Errorf("ensureRoot without an archive = %v", err)
	}
}

func TestInstalledVersion(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"var/lib/dpkg/status": "Package: librdmacm1\nStatus: deinstall ok config-files\nVersion: 1.0\n\n" +
		"Package: libibverbs1\nStatus: install ok installed\nPriority: optional\nVersion: 33.2-1\nDescription: x\n multi-line\n\n" +
		"Package: perftest\nStatus: install ok installed\nVersion: 4.4+0.37-1\n"})
	for pkg, want := range map[string]string{"libibverbs1": "33.2-1", "librdmacm1": "", "perftest": "4.4+0.37-1", "gcc": ""} {
		if got, err := installedVersion(root, pkg); got != want || err != nil {
			t.Errorf("installedVersion(%s) = %q, %v; want %q", pkg, got, err, want)
		}
	}
}

// A root of the right shape: Debian 11's (ip in /bin, no merged /usr) or
// 12's (/sbin a link to usr/sbin).
func fakeRoot(t *testing.T, merged bool) string {
	root := t.TempDir()
	files := map[string]string{"usr/bin/env": "", "usr/bin/rdma": "", "tmp/.keep": "", "proc/.keep": "", "sys/.keep": "", "dev/.keep": "", "run/.keep": ""}
	if merged {
		files["usr/sbin/ip"], files["usr/bin/sh"] = "", ""
	} else {
		files["bin/ip"], files["bin/sh"] = "", ""
	}
	writeFiles(t, root, files)
	if merged {
		for _, d := range []string{"bin", "sbin"} {
			if err := os.Symlink("usr/"+d, filepath.Join(root, d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestFindTools(t *testing.T) {
	if got, err := findTools(fakeRoot(t, false)); err != nil || got != (guestTools{ip: "/bin/ip", rdma: "/usr/bin/rdma"}) {
		t.Errorf("Debian 11 root: %+v, %v", got, err)
	}
	if got, err := findTools(fakeRoot(t, true)); err != nil || got != hostTools {
		t.Errorf("Debian 12 root: %+v, %v; want %+v", got, err, hostTools)
	}
	root := fakeRoot(t, false)
	os.Remove(filepath.Join(root, "usr/bin/rdma"))
	if _, err := findTools(root); err == nil || !strings.Contains(err.Error(), "no rdma") || !strings.Contains(err.Error(), "iproute2") {
		t.Errorf("root without rdma: %v", err)
	}
	if got, err := findTools("/"); err != nil || got != hostTools {
		t.Errorf("the host's root: %+v, %v; want %+v (rxevm needs a Debian 12 host)", got, err, hostTools)
	}
}

func TestPrepareRoot(t *testing.T) {
	root := fakeRoot(t, false)
	if _, err := prepareRoot(root, "/work/my dir"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "work/my dir")); err != nil || !fi.IsDir() {
		t.Errorf("the working directory's mount point was not made in the root: %v", err)
	}
	// The guest makes those under its tmpfs itself: a cached root does not
	// collect a directory for every test run's temporary directory.
	for _, d := range []string{"/tmp/TestBoot123/001", "/run/x"} {
		if _, err := prepareRoot(root, d); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
			t.Errorf("%s was made in the root: %v", d, err)
		}
	}
	if _, err := prepareRoot(t.TempDir(), "/w"); err == nil || !strings.Contains(err.Error(), "not a root filesystem") {
		t.Errorf("an empty directory as root: %v", err)
	}
	if _, err := prepareRoot(filepath.Join(root, "nonexistent"), "/w"); err == nil {
		t.Error("a missing root was accepted")
	}
}

// The flag's wiring, down to qemu: the guest's 9p root is -root, the
// working directory's mount point is made in it and init wires the network
// with the root's own ip, on one host and on two.
func TestBootWithRoot(t *testing.T) {
	if err := checkStatic("/bin/busybox"); err != nil {
		t.Skipf("the initramfs needs a static /bin/busybox: install busybox-static (rxevm -setup-only does): %v", err)
	}
	dir := t.TempDir()
	argsFile, initFile := filepath.Join(dir, "args"), filepath.Join(dir, "init")
	// qemu's stand-in reads the markers out of the initramfs it is given,
	// keeps what init runs in the chroot and its own arguments, and plays
	// a guest whose command succeeded.
	writeFiles(t, dir, map[string]string{"bin/qemu-system-x86_64": `#!/bin/sh
for a; do
	[ "$prev" = -initrd ] && initrd=$a
	[ "$prev" = -virtfs ] && echo "$a" >> ` + argsFile + `
	prev=$a
done
grep -a '^step chroot /host ' "$initrd" >> ` + initFile + `
n=$(grep -ao 'rxevm-ready-[0-9a-f]*' "$initrd" | head -n 1 | sed 's/rxevm-ready-//')
printf 'rxevm-ready-%s\r\nin the guest\r\nrxevm-exit-%s=0\r\n' "$n" "$n"
`})
	t.Setenv("PATH", filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))

	for _, hosts := range []string{"1", "2"} {
		os.Remove(argsFile)
		os.Remove(initFile)
		root := fakeRoot(t, false)
		o, err := parseFlags([]string{"-hosts", hosts, "-root", root + "/", "--", "true"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o.workdir = "/var/tmp/a,b"
		var out, log strings.Builder
		code, err := bootWith(context.Background(), &host{log: &log}, nil, machine{arch: amd64, kernel: kernel{vmlinuz: "/k"}, busybox: "/bin/busybox"}, o, &out)
		if code != 0 || err != nil {
			t.Fatalf("%s hosts: bootWith = %d, %v\n%s%s", hosts, code, err, out.String(), log.String())
		}
		if strings.Count(out.String(), "in the guest\n") != map[string]int{"1": 1, "2": 2}[hosts] {
			t.Errorf("%s hosts: output %q", hosts, out.String())
		}
		virtfs := lines(t, argsFile)
		wantRoot := "local,path=" + root + ",mount_tag=hostroot,"
		wantWork := "local,path=/var/tmp/a,,b,mount_tag=work,"
		if n := map[string]int{"1": 2, "2": 4}[hosts]; len(virtfs) != n ||
			slices.IndexFunc(virtfs, func(s string) bool { return strings.HasPrefix(s, wantRoot) }) < 0 ||
			slices.IndexFunc(virtfs, func(s string) bool { return strings.HasPrefix(s, wantWork) }) < 0 {
			t.Errorf("%s hosts: -virtfs %q; want %d, the root %s... and the working directory %s...", hosts, virtfs, n, wantRoot, wantWork)
		}
		for _, v := range virtfs {
			if strings.HasPrefix(v, "local,path=/,") {
				t.Errorf("%s hosts: the host's / is still exported: %s", hosts, v)
			}
		}
		if fi, err := os.Stat(filepath.Join(root, "var/tmp/a,b")); err != nil || !fi.IsDir() {
			t.Errorf("%s hosts: no mount point for the working directory in the root: %v", hosts, err)
		}
		init, _ := os.ReadFile(initFile)
		if !strings.Contains(string(init), "step chroot /host /bin/ip ") || strings.Contains(string(init), "/usr/sbin/ip") ||
			!strings.Contains(string(init), "step chroot /host /usr/bin/rdma link add rxe0 ") {
			t.Errorf("%s hosts: init does not wire the network with the root's /bin/ip and /usr/bin/rdma:\n%s", hosts, init)
		}
	}
}
