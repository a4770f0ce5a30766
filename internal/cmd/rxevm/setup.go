package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// hostPackages are the Debian packages rxevm needs on the host: qemu,
// busybox for the initramfs, depmod, and what the guest runs from the host's
// filesystem (ip, rdma, the verbs libraries, providers and tools).
var hostPackages = []string{
	"qemu-system-x86",
	"busybox-static",
	"kmod",
	"iproute2",
	"libibverbs-dev",
	"librdmacm-dev",
	"ibverbs-providers",
	"ibverbs-utils",
	"rdmacm-utils",
	"perftest",
}

// dpkgFormat makes dpkg-query print "name<TAB>status" lines, where an
// installed package's status starts with "ii".
const dpkgFormat = "${Package}\t${db:Status-Abbrev}\n"

// missingPackages returns the packages of want that dpkg-query's output
// (in dpkgFormat) does not show as installed, in the order of want.
func missingPackages(want []string, dpkgOut string) []string {
	installed := map[string]bool{}
	for line := range strings.Lines(dpkgOut) {
		name, status, _ := strings.Cut(strings.TrimRight(line, "\n"), "\t")
		if strings.HasPrefix(status, "ii") {
			installed[name] = true
		}
	}
	var missing []string
	for _, p := range want {
		if !installed[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

// host runs the commands that prepare this machine. In verbose mode their
// output goes to the log; otherwise it is shown only when they fail.
type host struct {
	log     io.Writer
	verbose bool
}

func (h *host) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "rxevm: "+format+"\n", args...)
}

// run runs a command in dir (the current directory if empty).
func (h *host) run(ctx context.Context, dir string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var out bytes.Buffer
	if h.verbose {
		h.logf("$ %s", shellJoin(cmd.Args))
		cmd.Stdout, cmd.Stderr = h.log, h.log
	} else {
		cmd.Stdout, cmd.Stderr = &out, &out
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", shellJoin(cmd.Args), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// aptGet runs apt-get, through sudo when not root. It waits up to 10
// minutes for apt's locks, which a fresh machine's apt-daily may hold
// (apt-get, unlike apt, does not wait by default).
func (h *host) aptGet(ctx context.Context, dir string, args ...string) error {
	args = append([]string{"-o", "DPkg::Lock::Timeout=600"}, args...)
	if os.Geteuid() != 0 {
		return h.run(ctx, dir, "sudo", append([]string{"-n", "apt-get"}, args...)...)
	}
	return h.run(ctx, dir, "apt-get", args...)
}

// aptListsPresent reports whether apt has package lists, without which
// apt-get install and download find nothing (a fresh container has none).
func aptListsPresent() bool {
	m, _ := filepath.Glob("/var/lib/apt/lists/*_Packages*")
	return len(m) > 0
}

// withAptLists runs an apt-get step, running apt-get update first when there
// are no package lists, and once more after the step fails with lists that
// may be stale (a superseded version is gone from the mirror).
func (h *host) withAptLists(ctx context.Context, step func() error) error {
	updated := false
	if !aptListsPresent() {
		if err := h.aptGet(ctx, "", "update"); err != nil {
			return err
		}
		updated = true
	}
	err := step()
	if err == nil || updated {
		return err
	}
	h.logf("retrying after apt-get update: %v", err)
	if uerr := h.aptGet(ctx, "", "update"); uerr != nil {
		return errors.Join(err, uerr)
	}
	return step()
}

// ensurePackages installs the packages of want that are missing.
func (h *host) ensurePackages(ctx context.Context, want []string) error {
	// dpkg-query exits 1 when a package is unknown to it, which only makes
	// that package missing: its output is what counts.
	out, err := exec.CommandContext(ctx, "dpkg-query", append([]string{"-W", "-f=" + dpkgFormat}, want...)...).Output()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return fmt.Errorf("dpkg-query: %w (rxevm needs a Debian host)", err)
	}
	missing := missingPackages(want, string(out))
	if len(missing) == 0 {
		return nil
	}
	h.logf("installing %s", strings.Join(missing, " "))
	return h.withAptLists(ctx, func() error {
		return h.aptGet(ctx, "", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	})
}

// kernel is an unpacked Debian kernel package in the cache.
type kernel struct {
	vmlinuz    string
	modulesDir string // ROOT/lib/modules/VERSION, with modules.dep
}

// kernelVersion returns the one kernel version under root/lib/modules.
func kernelVersion(root string) (string, error) {
	versions, err := os.ReadDir(filepath.Join(root, "lib/modules"))
	if err != nil {
		return "", err
	}
	if len(versions) != 1 {
		return "", fmt.Errorf("%s: want one kernel version in lib/modules, found %d", root, len(versions))
	}
	return versions[0].Name(), nil
}

// openKernel finds the kernel image and modules under an unpacked package.
func openKernel(dir string) (kernel, error) {
	return kernelIn(filepath.Join(dir, "root"))
}

// kernelIn finds the one kernel under root: boot/vmlinuz-V, and
// lib/modules/V with its modules.dep.
func kernelIn(root string) (kernel, error) {
	v, err := kernelVersion(root)
	if err != nil {
		return kernel{}, err
	}
	k := kernel{
		vmlinuz:    filepath.Join(root, "boot", "vmlinuz-"+v),
		modulesDir: filepath.Join(root, "lib/modules", v),
	}
	for _, f := range []string{k.vmlinuz, filepath.Join(k.modulesDir, "modules.dep")} {
		if _, err := os.Stat(f); err != nil {
			return kernel{}, err
		}
	}
	return k, nil
}

// pinnedKernel is the kernel package rxevm boots by default: Debian 12's
// 6.1 kernel, whose rxe the tests were written against.
const pinnedKernel = "linux-image-6.1.0-56-amd64"

// kernelSeries matches the names of pinnedKernel's series, one per ABI
// number (its first group). Debian keeps a name in the archive only until
// a later ABI replaces it, in a point release or a security update.
var kernelSeries = regexp.MustCompile(`^linux-image-6\.1\.0-([0-9]+)-amd64$`)

// ensurePinnedKernel is ensureKernel for the pinned package, which, once
// the archive has dropped it (apt knows no version of it, its lists
// updated), gives way to the newest of its series that apt has, or the
// newest already unpacked in cacheDir when apt has none, said in the log:
// without this every boot on a fresh machine would fail from the day of
// the next ABI, until someone moves the pin.
func (h *host) ensurePinnedKernel(ctx context.Context, cacheDir, pin string) (kernel, error) {
	var err error
	if _, uncached := openKernel(filepath.Join(cacheDir, pin)); uncached != nil && aptListsPresent() {
		// Lists without the pin are either older than it (a machine
		// image's, never updated: seen on 2026-11-28, where rxevm booted
		// 6.1.0-48 in place of the pinned 56 that the archive had) or
		// newer than the archive's dropping it: withAptLists updates them
		// once to tell which. Lists lose a package only when updated, so
		// one still missing after that is gone, no download to try;
		// offline, the old lists stand.
		err = h.withAptLists(ctx, func() error {
			if !h.aptHas(ctx, pin) {
				return fmt.Errorf("%s: not in apt's lists", pin)
			}
			return nil
		})
	}
	if err == nil {
		var k kernel
		if k, err = h.ensureKernel(ctx, cacheDir, pin); err == nil || h.aptHas(ctx, pin) {
			return k, err
		}
	}
	next := h.newestInSeries(ctx, cacheDir)
	if next == "" || next == pin {
		return kernel{}, fmt.Errorf("%w\n(apt's lists have no version of %s, nor of another linux-image-6.1.0-N-amd64, and none is unpacked in %s)", err, pin, cacheDir)
	}
	h.logf("%s is no longer in the Debian archive: booting %s, the newest of its series (make it rxevm's pinnedKernel)", pin, next)
	return h.ensureKernel(ctx, cacheDir, next)
}

// aptHas reports whether apt's lists have a version of pkg to download.
func (h *host) aptHas(ctx context.Context, pkg string) bool {
	out, err := exec.CommandContext(ctx, "apt-cache", "madison", pkg).Output()
	return err == nil && len(bytes.TrimSpace(out)) > 0
}

// newestInSeries returns the kernelSeries package with the highest ABI
// that apt's lists have, or, when they have none, that is unpacked in
// cacheDir; "" when there is neither.
func (h *host) newestInSeries(ctx context.Context, cacheDir string) string {
	var names []string
	if out, err := exec.CommandContext(ctx, "apt-cache", "pkgnames", "linux-image-6.1.0-").Output(); err == nil {
		for _, n := range strings.Fields(string(out)) {
			if kernelSeries.MatchString(n) && h.aptHas(ctx, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		dirs, _ := os.ReadDir(cacheDir)
		for _, d := range dirs {
			if n := d.Name(); kernelSeries.MatchString(n) {
				if _, err := openKernel(filepath.Join(cacheDir, n)); err == nil {
					names = append(names, n)
				}
			}
		}
	}
	abi := func(n string) int {
		v, _ := strconv.Atoi(kernelSeries.FindStringSubmatch(n)[1])
		return v
	}
	best := ""
	for _, n := range names {
		if best == "" || abi(n) > abi(best) {
			best = n
		}
	}
	return best
}

// ensureKernel returns the kernel package pkg unpacked in cacheDir/pkg,
// downloading and unpacking it first if it is not there. The package is
// unpacked beside its final place and renamed into it when complete, under a
// lock, so an interrupted or concurrent run never sees half a kernel.
func (h *host) ensureKernel(ctx context.Context, cacheDir, pkg string) (kernel, error) {
	dir := filepath.Join(cacheDir, pkg)
	if k, err := openKernel(dir); err == nil {
		return k, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return kernel{}, fmt.Errorf("kernel cache: %w (choose another with -cache)", err)
	}
	unlock, err := lockFile(filepath.Join(cacheDir, ".lock"))
	if err != nil {
		return kernel{}, err
	}
	defer unlock()
	if k, err := openKernel(dir); err == nil {
		return k, nil // another run prepared it while we waited
	}
	// What an earlier run left half-done when it was killed is garbage now
	// that we hold the lock.
	stale, _ := filepath.Glob(filepath.Join(cacheDir, pkg+".partial-*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
	tmp, err := os.MkdirTemp(cacheDir, pkg+".partial-")
	if err != nil {
		return kernel{}, err
	}
	defer os.RemoveAll(tmp)

	h.logf("downloading %s into %s (once)", pkg, cacheDir)
	if err := h.withAptLists(ctx, func() error { return h.aptGet(ctx, tmp, "download", pkg) }); err != nil {
		return kernel{}, err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, pkg+"_*.deb"))
	if len(debs) != 1 {
		return kernel{}, fmt.Errorf("apt-get download %s: want one .deb in %s, found %d", pkg, tmp, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if err := h.run(ctx, "", "dpkg", "-x", debs[0], root); err != nil {
		return kernel{}, err
	}
	version, err := kernelVersion(root)
	if err != nil {
		return kernel{}, err
	}
	if err := h.run(ctx, "", "depmod", "-b", root, version); err != nil {
		return kernel{}, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it private
		return kernel{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return kernel{}, err
	}
	return openKernel(dir)
}

// lockFile takes an exclusive flock on path, waiting for it, and returns
// the function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// checkStatic makes sure a binary going into the initramfs needs no
// dynamic loader: the initramfs has no libraries. (Debian's busybox package,
// as opposed to busybox-static, puts a dynamic one at the same path.)
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; install busybox-static", path)
		}
	}
	return nil
}
