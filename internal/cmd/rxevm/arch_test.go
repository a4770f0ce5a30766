package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// elfHeader returns the 64 bytes of a little-endian ELF64 executable's
// header for machine m, with no program or section headers: enough for
// debug/elf, and static as checkStatic sees it (no PT_INTERP).
func elfHeader(m elf.Machine) []byte {
	h := make([]byte, 64)
	copy(h, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	le := binary.LittleEndian
	le.PutUint16(h[16:], uint16(elf.ET_EXEC))
	le.PutUint16(h[18:], uint16(m))
	le.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	le.PutUint16(h[52:], 64) // e_ehsize
	le.PutUint16(h[54:], 56) // e_phentsize
	le.PutUint16(h[58:], 64) // e_shentsize
	return h
}

func TestRootArch(t *testing.T) {
	for _, c := range []struct {
		machine elf.Machine
		want    string
	}{{elf.EM_X86_64, "amd64"}, {elf.EM_AARCH64, "arm64"}} {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"usr/bin/env": string(elfHeader(c.machine))})
		a, err := rootArch(root)
		if err != nil || a.name != c.want {
			t.Errorf("%v root: %s, %v; want %s", c.machine, a.name, err, c.want)
		}
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"usr/bin/env": string(elfHeader(elf.EM_RISCV))})
	if _, err := rootArch(root); err == nil || !strings.Contains(err.Error(), "EM_RISCV") || !strings.Contains(err.Error(), "amd64 and arm64 only") {
		t.Errorf("riscv64 root: %v; want an error naming its machine and what rxevm boots", err)
	}
	if _, err := rootArch(fakeRoot(t, true)); err == nil || !strings.Contains(err.Error(), "architecture of its programs") {
		t.Errorf("a root whose env is no ELF file: %v", err)
	}
	if a, err := rootArch("/"); err != nil || a.name != "amd64" {
		t.Errorf("the host's /: %s, %v; rxevm runs on amd64", a.name, err)
	}
}

// kernelRoot writes a root that brings its own kernel, as the recipes of
// bookworm-arm64 and trixie leave it, as far as rxevm looks: programs for
// machine m, kernel version v with modules.dep, a static busybox.
func kernelRoot(t *testing.T, m elf.Machine, v string) string {
	root := fakeRoot(t, true)
	prog := string(elfHeader(m))
	writeFiles(t, root, map[string]string{
		"usr/bin/env":                       prog,
		"bin/busybox":                       prog,
		"boot/vmlinuz-" + v:                 "kernel",
		"lib/modules/" + v + "/modules.dep": "kernel/crypto/crc32_generic.ko:\n",
	})
	return root
}

// arm64Root writes a root as the bookworm-arm64 recipe leaves it.
func arm64Root(t *testing.T) string { return kernelRoot(t, elf.EM_AARCH64, "6.1.0-50-arm64") }

// The recipe each architecture's errors name builds a root that brings a
// kernel of that architecture and busybox-static.
func TestGuestArchKernelRoots(t *testing.T) {
	for _, a := range guestArches {
		r, err := findRootRecipe(a.kernelRoot)
		if err != nil {
			t.Errorf("%s: %v", a.name, err)
			continue
		}
		if !slices.Contains(r.packages, "linux-image-"+a.name) || !slices.Contains(r.packages, "busybox-static") ||
			(r.arch != "" && r.arch != a.name) {
			t.Errorf("%s: root %s (arch %q) lacks linux-image-%s or busybox-static: %q", a.name, r.name, r.arch, a.name, r.packages)
		}
	}
}

// An amd64 root with its own kernel but no static busybox names the amd64
// recipe that has both.
func TestOwnKernelMachineAmd64(t *testing.T) {
	root := kernelRoot(t, elf.EM_X86_64, "6.12.117+deb13-amd64")
	os.Remove(filepath.Join(root, "bin/busybox"))
	if _, err := ownKernelMachine(root, amd64); err == nil || !strings.Contains(err.Error(), "rxevm -setup-root trixie builds") ||
		!strings.Contains(err.Error(), "is amd64") {
		t.Errorf("an amd64 root without busybox: %v; want an error naming the root's architecture and the trixie recipe", err)
	}
}

// An arm64 root always boots its own kernel; an amd64 one when it has one,
// as trixie's has, and the host's / never.
func TestBootsOwnKernel(t *testing.T) {
	bare := arm64Root(t)
	os.RemoveAll(filepath.Join(bare, "boot"))
	amd64Bare := kernelRoot(t, elf.EM_X86_64, "6.12.117+deb13-amd64")
	os.RemoveAll(filepath.Join(amd64Bare, "boot"))
	for _, c := range []struct {
		what, root string
		want       bool
	}{
		{"an arm64 root", arm64Root(t), true},
		{"an arm64 root without a kernel (refused later, by name)", bare, true},
		{"an amd64 root with a kernel", kernelRoot(t, elf.EM_X86_64, "6.12.117+deb13-amd64"), true},
		{"an amd64 root with modules but no kernel image", amd64Bare, false},
		{"an amd64 root without a kernel", fakeRoot(t, true), false},
		{"the host's /", "/", false},
	} {
		arch := amd64
		if a, err := rootArch(c.root); err == nil {
			arch = a
		}
		if got := bootsOwnKernel(c.root, arch); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}

func TestOwnKernelMachine(t *testing.T) {
	root := arm64Root(t)
	arm64, err := rootArch(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ownKernelMachine(root, arm64)
	if err != nil {
		t.Fatal(err)
	}
	want := machine{arch: arm64, busybox: root + "/bin/busybox", kernel: kernel{
		vmlinuz: root + "/boot/vmlinuz-6.1.0-50-arm64", modulesDir: root + "/lib/modules/6.1.0-50-arm64"}}
	if m.arch.name != want.arch.name || m.kernel != want.kernel || m.busybox != want.busybox {
		t.Errorf("machine %+v, want %+v", m, want)
	}
	// Each part missing, or a busybox that needs a loader, says what the
	// root lacks and which recipe has it.
	for _, c := range []struct{ what, remove, write string }{
		{"no kernel", "boot/vmlinuz-6.1.0-50-arm64", ""},
		{"no modules.dep", "lib/modules/6.1.0-50-arm64/modules.dep", ""},
		{"no busybox", "bin/busybox", ""},
		{"dynamic busybox", "", "bin/busybox"},
		{"no modules at all", "lib/modules", ""},
	} {
		root := arm64Root(t)
		if c.remove != "" {
			os.RemoveAll(filepath.Join(root, c.remove))
		}
		if c.write != "" {
			dynamic, err := os.ReadFile("/usr/bin/env") // the host's: it has PT_INTERP
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, root, map[string]string{c.write: string(dynamic)})
		}
		if _, err := ownKernelMachine(root, arm64); err == nil || !strings.Contains(err.Error(), "rxevm -setup-root bookworm-arm64") ||
			!strings.Contains(err.Error(), "is arm64") {
			t.Errorf("%s: %v; want an error naming the root's architecture and the recipe", c.what, err)
		}
	}
}

// An arm64 root boots on qemu-system-aarch64's virt board with the root's
// kernel, an initramfs with the root's busybox, and the console on the
// PL011 UART.
func TestBootArm64Root(t *testing.T) {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	writeFiles(t, dir, map[string]string{"bin/qemu-system-aarch64": `#!/bin/sh
printf '%s\n' "$@" > ` + argsFile + `
for a; do
	[ "$prev" = -initrd ] && cp "$a" ` + filepath.Join(dir, "initrd") + `
	[ "$prev" = -initrd ] && initrd=$a
	prev=$a
done
n=$(grep -ao 'rxevm-ready-[0-9a-f]*' "$initrd" | head -n 1 | sed 's/rxevm-ready-//')
printf 'rxevm-ready-%s\r\nin the guest\r\nrxevm-exit-%s=0\r\n' "$n" "$n"
`})
	t.Setenv("PATH", filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	root := arm64Root(t)
	arm64, _ := rootArch(root)
	m, err := ownKernelMachine(root, arm64)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-root", root, "--", "true"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.workdir = "/var/tmp/w"
	var out, log strings.Builder
	if code, err := bootWith(context.Background(), &host{log: &log}, nil, m, o, &out); code != 0 || err != nil {
		t.Fatalf("bootWith = %d, %v\n%s%s", code, err, out.String(), log.String())
	}
	args := lines(t, argsFile)
	joined := strings.Join(args, " ")
	for _, want := range []string{"-accel tcg -machine virt -cpu cortex-a72 ", "-kernel " + m.kernel.vmlinuz + " ",
		"console=ttyAMA0 quiet panic=-1", "local,path=" + root + ",mount_tag=hostroot,"} {
		if !strings.Contains(joined, want) {
			t.Errorf("qemu-system-aarch64 args lack %q: %q", want, args)
		}
	}
	if strings.Contains(joined, "ttyS0") {
		t.Errorf("an arm64 guest's console is ttyAMA0, not ttyS0: %q", args)
	}
	initrd, err := os.ReadFile(filepath.Join(dir, "initrd"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(initrd, elfHeader(elf.EM_AARCH64)) {
		t.Errorf("the initramfs lacks the root's arm64 busybox")
	}
	if bb, _ := os.ReadFile("/bin/busybox"); len(bb) > 0 && bytes.Contains(initrd, bb[:4096]) {
		t.Errorf("the initramfs has the host's amd64 busybox")
	}
}

// TestArm64Recipes: each arm64 root is only unpacked, from its suite, with
// what an arm64 guest boots on and the hooks that make it bootable.
func TestArm64Recipes(t *testing.T) {
	for _, tc := range []struct{ name, suite, librdmacm string }{
		{"bookworm-arm64", "bookworm", "librdmacm1"},
		{"trixie-arm64", "trixie", "librdmacm1t64"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkArm64Recipe(t, tc.name, tc.suite, tc.librdmacm) })
	}
}

func checkArm64Recipe(t *testing.T, name, suite, librdmacm string) {
	r, err := findRootRecipe(name)
	if err != nil {
		t.Fatal(err)
	}
	args := r.mmdebstrapArgs("/d", "http://archive.example/debian")
	// Only unpacked: the host runs no arm64 maintainer script.
	if !slices.Equal(args[:2], []string{"--variant=extract", "--arch=arm64"}) ||
		!slices.Equal(args[len(args)-3:], []string{suite, "/d", "http://archive.example/debian"}) {
		t.Errorf("mmdebstrap args %q", args)
	}
	for _, p := range []string{"linux-image-arm64", "busybox-static", "libibverbs1", "ibverbs-providers", librdmacm, "dash"} {
		if !slices.Contains(r.packages, p) {
			t.Errorf("%s lacks %s", name, p)
		}
	}
	// The hooks run in an extract root, and make what ownKernelMachine and
	// prepareRoot look for.
	joined := strings.Join(args, " ")
	if strings.Contains(joined, "--customize-hook") || !strings.Contains(joined, `--extract-hook=depmod -b "$1"`) ||
		!strings.Contains(joined, `--extract-hook=mkdir -p "$1/proc" "$1/sys" "$1/dev" "$1/run" "$1/tmp"`) {
		t.Errorf("hooks: %q (mmdebstrap's extract variant runs extract hooks only)", args)
	}
	if !strings.Contains(joined, `--setup-hook=for d in bin sbin lib; do mkdir -p "$1/usr/$d" && ln -s "usr/$d" "$1/$d"`) {
		t.Errorf("no merged /usr: %q", args)
	}
	if !strings.Contains(r.stamp(), "--extract-hook=depmod") {
		t.Errorf("the stamp leaves out the hooks: %q", r.stamp())
	}
}

func gzipped(t *testing.T, s string) string {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write([]byte(s))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// An unpacked root has an empty dpkg database: the version comes from the
// package's changelog. A root with a database never looks there.
func TestInstalledVersionUnpacked(t *testing.T) {
	changelog := gzipped(t, "rdma-core (44.0-2) unstable; urgency=medium\n\n  * New upstream release.\n")
	for _, status := range []string{"", "absent"} {
		root := t.TempDir()
		files := map[string]string{"usr/share/doc/libibverbs1/changelog.Debian.gz": changelog}
		if status == "" {
			files["var/lib/dpkg/status"] = ""
		}
		writeFiles(t, root, files)
		for pkg, want := range map[string]string{"libibverbs1": "44.0-2", "librdmacm1": ""} {
			if got, err := installedVersion(root, pkg); got != want || err != nil {
				t.Errorf("status file %q: installedVersion(%s) = %q, %v; want %q", status, pkg, got, err, want)
			}
		}
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"var/lib/dpkg/status": "Package: gcc\nStatus: install ok installed\nVersion: 12\n",
		"usr/share/doc/libibverbs1/changelog.Debian.gz": changelog})
	if got, err := installedVersion(root, "libibverbs1"); got != "" || err != nil {
		t.Errorf("a dpkg database without libibverbs1: %q, %v; want \"\" (its changelog is a leftover)", got, err)
	}
	root = t.TempDir()
	writeFiles(t, root, map[string]string{"usr/share/doc/libibverbs1/changelog.Debian.gz": gzipped(t, "garbage\n")})
	if _, err := installedVersion(root, "libibverbs1"); err == nil || !strings.Contains(err.Error(), "no version in its first line") {
		t.Errorf("a changelog without a version: %v", err)
	}
}

// run on an arm64 root, and on an amd64 root with its own kernel: the
// root's kernel, named, under the architecture's qemu; -setup-only stops
// there; -kernel-pkg is refused; an arm64 root without a kernel says what
// it lacks before anything is installed; a missing root is named as
// before.
func TestRunOwnKernelRoot(t *testing.T) {
	dir := t.TempDir()
	asked := filepath.Join(dir, "asked")
	// dpkg-query's stand-in: every package installed, and a note that it
	// was asked.
	writeFiles(t, dir, map[string]string{"bin/dpkg-query": `#!/bin/sh
echo "$@" >> ` + asked + `
for a; do case $a in -*) ;; *) printf '%s\tii \n' "$a";; esac; done
`})
	t.Setenv("PATH", filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	ctx := context.Background()
	runWith := func(args ...string) (int, string, error) {
		t.Helper()
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o.workdir = "/var/tmp/w"
		var out, log strings.Builder
		code, err := run(ctx, o, &out, &log)
		return code, log.String(), err
	}

	for _, c := range []struct {
		arch, kernel, qemuPackage string
		root                      string
	}{
		{"arm64", "6.1.0-50-arm64", "qemu-system-arm", arm64Root(t)},
		{"amd64", "6.12.117+deb13-amd64", "qemu-system-x86", kernelRoot(t, elf.EM_X86_64, "6.12.117+deb13-amd64")},
	} {
		os.Remove(asked)
		code, log, err := runWith("-setup-only", "-root", c.root)
		if code != 0 || err != nil || !strings.Contains(log, c.arch+" guest: the root's kernel "+c.kernel) ||
			!strings.Contains(log, "ready: kernel "+c.root+"/boot/vmlinuz-"+c.kernel) {
			t.Errorf("-setup-only on an %s root with its own kernel: %d, %v\n%s", c.arch, code, err, log)
		}
		if b, _ := os.ReadFile(asked); !strings.Contains(string(b), c.qemuPackage) {
			t.Errorf("%s was not checked for: dpkg-query asked %q", c.qemuPackage, b)
		}
		if code, _, err := runWith("-kernel-pkg", "linux-image-6.1.0-57-amd64", "-root", c.root, "--", "true"); code != 2 ||
			err == nil || !strings.Contains(err.Error(), "is "+c.arch+" and boots its own kernel") {
			t.Errorf("-kernel-pkg with an %s root with its own kernel: %d, %v", c.arch, code, err)
		}
	}

	os.Remove(asked)
	bare := arm64Root(t)
	os.RemoveAll(filepath.Join(bare, "boot"))
	if _, _, err := runWith("-root", bare, "--", "true"); err == nil || !strings.Contains(err.Error(), "rxevm -setup-root bookworm-arm64") {
		t.Errorf("an arm64 root without a kernel: %v", err)
	}
	if _, err := os.Stat(asked); err == nil {
		t.Error("packages were checked for, or installed, before the root was found wanting")
	}

	if _, _, err := runWith("-root", filepath.Join(dir, "nonexistent"), "--", "true"); err == nil || !strings.Contains(err.Error(), "guest root: stat ") {
		t.Errorf("a missing root: %v", err)
	}
}

// run on the host's kind of root, without a kernel of its own: the pinned
// kernel from the cache, named by version as a root's own kernel is, and
// -kernel-pkg's likewise.
func TestRunNamesCachedKernel(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bin/dpkg-query": `#!/bin/sh
for a; do case $a in -*) ;; *) printf '%s\tii \n' "$a";; esac; done
`})
	t.Setenv("PATH", filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	cache := filepath.Join(dir, "cache")
	pinned := strings.TrimPrefix(pinnedKernel, "linux-image-")
	for pkg, v := range map[string]string{pinnedKernel: pinned, "linux-image-6.0.0-9-amd64": "6.0.0-9-amd64"} {
		writeFiles(t, filepath.Join(cache, pkg, "root"), map[string]string{
			"boot/vmlinuz-" + v:                 "kernel",
			"lib/modules/" + v + "/modules.dep": "",
		})
	}
	root := fakeRoot(t, true)
	writeFiles(t, root, map[string]string{"usr/bin/env": string(elfHeader(elf.EM_X86_64))})
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "amd64 guest: kernel " + pinned + "\n"},
		{[]string{"-kernel-pkg", "linux-image-6.0.0-9-amd64"}, "amd64 guest: kernel 6.0.0-9-amd64\n"},
	} {
		o, err := parseFlags(append([]string{"-setup-only", "-cache", cache, "-root", root}, c.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o.workdir = "/var/tmp/w"
		var out, log strings.Builder
		if code, err := run(context.Background(), o, &out, &log); code != 0 || err != nil || !strings.Contains(log.String(), c.want) {
			t.Errorf("-setup-only %q: %d, %v; want the log to say %q:\n%s", c.args, code, err, c.want, log.String())
		}
	}
}
