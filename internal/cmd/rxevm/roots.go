package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A guest root is the filesystem the guest chroots into, exported read-only
// over 9p: the host's own / (Debian 12, rdma-core 44.0) by default, or a
// root that mmdebstrap builds from Debian's archive with another release's
// rdma-core userspace (libibverbs, librdmacm, the rxe provider, the C
// tools), or with none at all.

// rootRecipe is one such root: what mmdebstrap installs, from which suite.
type rootRecipe struct {
	name     string
	suite    string
	about    string
	packages []string
	aptOpts  []string // --aptopt values

	// A root of another architecture than the host's: its packages are
	// only unpacked (mmdebstrap --variant=extract), since the host cannot
	// run their maintainer scripts, and hooks, shell commands run on the
	// host with the root's directory as $1, do what those scripts and
	// debootstrap would have done that the guest needs: setupHooks before
	// the packages are unpacked, hooks after (mmdebstrap's --setup-hook and
	// --extract-hook; the extract variant runs no customize hook).
	arch       string // Debian's name; "" for the host's
	setupHooks []string
	hooks      []string
}

// rdmaUserspace is what a guest needs to run the tests/rxe binaries and
// rdma-core's tools on rxe, besides librdmacm, whose package was renamed
// librdmacm1t64 in Debian 13 (the 64-bit time_t transition).
var rdmaUserspace = []string{"libibverbs1", "ibverbs-providers", "ibverbs-utils", "rdmacm-utils", "perftest", "iproute2"}

var rootRecipes = []rootRecipe{
	{
		name: "bullseye", suite: "bullseye",
		about: "Debian 11, rdma-core 33.2, glibc 2.31; gcc and libc6-dev to build binaries inside it",
		// A binary linked on Debian 12 needs glibc 2.34 and does not start
		// here: test binaries are built inside this root (tests/chroot-go.sh).
		packages: append(slices.Clone(rdmaUserspace), "librdmacm1", "libc6-dev", "gcc"),
	},
	{
		name: "trixie", suite: "trixie",
		about: "Debian 13, rdma-core 56.1, with its own kernel (linux-image-amd64, 6.12) and busybox for the guest's initramfs",
		// The guest boots Debian 13's kernel (bootsOwnKernel), so that 56.1
		// meets the rxe and uverbs a Debian 13 user has, where bullseye's
		// and the host's guests boot the pinned 6.1.
		packages: append(slices.Clone(rdmaUserspace), "librdmacm1t64", "linux-image-amd64", "busybox-static"),
	},
	{
		name: "sid", suite: "sid",
		about: "Debian unstable (rdma-core 65.0, gcc 16 and kernel 7.2 when measured); gcc and libc6-dev to build binaries inside it; its own kernel and busybox for the guest's initramfs",
		// rxe-matrix builds sid's test binaries inside this root, so that
		// the newest gcc, with the strictest defaults (gcc 14 made
		// incompatible pointer types errors, gcc 15 C23 the default), and
		// glibc compile the cgo code a user on a new release compiles. Its
		// guest boots unstable's kernel (bootsOwnKernel), the newest rxe
		// and uverbs, as the root was built: 7.2 when measured.
		packages: append(slices.Clone(rdmaUserspace), "librdmacm1t64", "libc6-dev", "gcc", "linux-image-amd64", "busybox-static"),
		// Unstable's Release file is short-lived and reads as expired against
		// a clock that runs behind the archive; its signature is still checked.
		aptOpts: []string{`Acquire::Check-Valid-Until "false"`},
	},
	arm64Recipe("bookworm-arm64", "bookworm", "librdmacm1",
		"Debian 12 for arm64, rdma-core 44.0, with its own kernel (linux-image-arm64) and busybox for the guest's initramfs"),
	// Debian 13's rdma-core and kernel, as trixie's on amd64.
	arm64Recipe("trixie-arm64", "trixie", "librdmacm1t64",
		"Debian 13 for arm64, rdma-core 56.1, with its own kernel (linux-image-arm64, 6.12) and busybox for the guest's initramfs"),
	{
		name: "nordma", suite: "bookworm",
		about:    "Debian 12 with no rdma-core package at all; gcc and libc6-dev to build in it",
		packages: []string{"gcc", "libc6-dev", "iproute2"},
	},
}

// arm64Recipe is the recipe of an arm64 root of Debian suite, whose librdmacm
// package is librdmacm. An arm64 guest boots the root's own kernel, under
// qemu-system-aarch64; busybox-static is the initramfs's shell, dash has
// the root's /bin/sh, gzip and sed read libibverbs1's version from its
// changelog (an unpacked root has no dpkg database).
func arm64Recipe(name, suite, librdmacm, about string) rootRecipe {
	return rootRecipe{
		name: name, suite: suite, arch: "arm64", about: about,
		packages: append(slices.Clone(rdmaUserspace), librdmacm, "linux-image-arm64", "busybox-static",
			"dash", "coreutils", "gzip", "sed"),
		// Merged /usr, as every Debian 12 and 13 system has it
		// (debootstrap and the installer make /bin, /sbin and /lib links
		// into /usr): programs and tests may name /usr/sbin/ip.
		setupHooks: []string{`for d in bin sbin lib; do mkdir -p "$1/usr/$d" && ln -s "usr/$d" "$1/$d" || exit 1; done`},
		hooks: []string{
			`mkdir -p "$1/proc" "$1/sys" "$1/dev" "$1/run" "$1/tmp"`,
			// modules.dep, which rxevm reads for the modules' load order;
			// the kernel's postinst would have made it.
			`depmod -b "$1" "$(ls "$1/lib/modules")"`,
		},
	}
}

// findRootRecipe returns the recipe called name.
func findRootRecipe(name string) (rootRecipe, error) {
	var names []string
	for _, r := range rootRecipes {
		if r.name == name {
			return r, nil
		}
		names = append(names, r.name)
	}
	return rootRecipe{}, fmt.Errorf("no root called %q: want one of %s (bookworm is the host's own /, the default -root)",
		name, strings.Join(names, ", "))
}

// mmdebstrapArgs is mmdebstrap's command line, less the program, that builds
// the root into dir from the Debian archive at archive.
func (r rootRecipe) mmdebstrapArgs(dir, archive string) []string {
	args := []string{"--variant=apt"}
	if r.arch != "" {
		args = []string{"--variant=extract", "--arch=" + r.arch}
	}
	args = append(args, "--include="+strings.Join(r.packages, ","))
	for _, o := range r.aptOpts {
		args = append(args, "--aptopt="+o)
	}
	for _, hk := range r.setupHooks {
		args = append(args, "--setup-hook="+hk)
	}
	for _, hk := range r.hooks {
		args = append(args, "--extract-hook="+hk)
	}
	return append(args, r.suite, dir, archive)
}

// stamp is what a built root's stamp file holds: the command line with the
// directory and the archive left out (a mirror is the same archive), so that
// a changed recipe makes the root again and an unchanged one never does.
func (r rootRecipe) stamp() string {
	return "mmdebstrap " + shellJoin(r.mmdebstrapArgs("DIR", "ARCHIVE")) + "\n"
}

// rootPackages are the host packages needed to build roots (kmod for
// the hooks' depmod).
var rootPackages = []string{"mmdebstrap", "kmod"}

// ensureRoot returns the directory of root r under cacheDir/roots, building
// it first unless its stamp says it was built from this recipe. archive is
// asked for the Debian archive's URI only when the root is built. As the
// kernel, the root is made beside its place and renamed into it, under a
// lock, the stamp written last: an interrupted or concurrent run never sees
// half a root.
func (h *host) ensureRoot(ctx context.Context, cacheDir string, r rootRecipe, archive func() (string, error)) (string, error) {
	dir := filepath.Join(cacheDir, "roots")
	root := filepath.Join(dir, r.name)
	stampFile := root + ".stamp"
	ready := func() bool {
		b, err := os.ReadFile(stampFile)
		fi, serr := os.Stat(root)
		return err == nil && string(b) == r.stamp() && serr == nil && fi.IsDir()
	}
	if ready() {
		return root, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("root cache: %w (choose another with -cache)", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if ready() {
		return root, nil // another run built it while we waited
	}
	uri, err := archive()
	if err != nil {
		return "", err
	}
	stale, _ := filepath.Glob(filepath.Join(dir, r.name+".partial-*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
	tmp, err := os.MkdirTemp(dir, r.name+".partial-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)

	h.logf("building root %s (%s) into %s with mmdebstrap (once)", r.name, r.about, root)
	if err := h.run(ctx, "", "mmdebstrap", r.mmdebstrapArgs(tmp, uri)...); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it private
		return "", err
	}
	// An old root of another recipe goes, stamp first.
	if err := os.Remove(stampFile); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, root); err != nil {
		return "", err
	}
	if err := os.WriteFile(stampFile+".tmp", []byte(r.stamp()), 0o644); err != nil {
		return "", err
	}
	return root, os.Rename(stampFile+".tmp", stampFile)
}

// debianSuites name the releases of Debian's main archive; a source for
// "bookworm-security", or a third party's "nodistro", never matches them.
var debianSuites = []string{"bullseye", "bookworm", "trixie", "forky", "duke", "sid",
	"oldoldstable", "oldstable", "stable", "testing", "unstable"}

// debianArchiveURI returns the archive from which roots are built: the first
// URI of an enabled "deb" source, in the apt configuration under etcApt,
// whose suites include a plain Debian release (as headers/fetch.sh finds
// it), deb822 .sources files first, then one-line .list files. The project
// names no host: the machine's own sources do.
func debianArchiveURI(etcApt string) (string, error) {
	sources, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", "*.sources"))
	for _, f := range sources {
		if uri, err := scanFile(f, deb822Archive); err != nil || uri != "" {
			return uri, err
		}
	}
	lists, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", "*.list"))
	for _, f := range append([]string{filepath.Join(etcApt, "sources.list")}, lists...) {
		if uri, err := scanFile(f, oneLineArchive); err != nil || uri != "" {
			return uri, err
		}
	}
	return "", fmt.Errorf("no Debian archive (an enabled 'deb' source for %s) in %s/sources.list{,.d}",
		strings.Join(debianSuites[:6], ", "), etcApt)
}

// scanFile applies find to the file at name, naming the file in its
// error; a missing file gives "" (no source, no version).
func scanFile(name string, find func(io.Reader) (string, error)) (string, error) {
	f, err := os.Open(name)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	uri, err := find(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return uri, nil
}

func isDebianSuite(s string) bool { return slices.Contains(debianSuites, s) }

// deb822Archive finds the archive in a deb822 .sources file: stanzas of
// "Field: value" lines (a value may go on in indented lines) separated by
// blank lines.
func deb822Archive(r io.Reader) (string, error) {
	var stanza map[string]string
	var field string
	archive := func() string {
		defer func() { stanza = nil }()
		if stanza == nil || !slices.Contains(strings.Fields(stanza["types"]), "deb") ||
			strings.EqualFold(strings.TrimSpace(stanza["enabled"]), "no") ||
			!slices.ContainsFunc(strings.Fields(stanza["suites"]), isDebianSuite) {
			return ""
		}
		if uris := strings.Fields(stanza["uris"]); len(uris) > 0 {
			return uris[0]
		}
		return ""
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "":
			if uri := archive(); uri != "" {
				return uri, nil
			}
		case line[0] == ' ' || line[0] == '\t':
			if stanza != nil && field != "" {
				stanza[field] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return "", fmt.Errorf("not a deb822 field: %q", line)
			}
			if stanza == nil {
				stanza = map[string]string{}
			}
			field = strings.ToLower(strings.TrimSpace(k))
			stanza[field] = strings.TrimSpace(v)
		}
	}
	return archive(), sc.Err()
}

// oneLineArchive finds the archive in a one-line sources.list file:
// "deb [options] URI SUITE COMPONENT...".
func oneLineArchive(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) == 0 || w[0] != "deb" {
			continue
		}
		w = w[1:]
		if len(w) > 0 && strings.HasPrefix(w[0], "[") {
			end := slices.IndexFunc(w, func(s string) bool { return strings.HasSuffix(s, "]") })
			if end < 0 {
				continue
			}
			w = w[end+1:]
		}
		if len(w) >= 2 && isDebianSuite(w[1]) {
			return w[0], nil
		}
	}
	return "", sc.Err()
}

// installedVersion returns the version of package pkg in root: the one
// its dpkg status file holds as installed, or, when the file holds no
// package at all (a root that mmdebstrap only unpacked), the one at the
// head of the package's Debian changelog; "" when there is neither.
func installedVersion(root, pkg string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	for stanza := range strings.SplitSeq(string(b), "\n\n") {
		fields := map[string]string{}
		for line := range strings.Lines(stanza) {
			if k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), ": "); ok {
				fields[k] = v
			}
		}
		if fields["Package"] == pkg && strings.HasSuffix(fields["Status"], " installed") {
			return fields["Version"], nil
		}
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return "", nil
	}
	return changelogVersion(filepath.Join(root, "usr/share/doc", pkg, "changelog.Debian.gz"))
}

// changelogVersion returns the version of the first entry of a gzipped
// Debian changelog ("rdma-core (44.0-2) unstable; urgency=medium"), or ""
// when there is no such file: the source package's version, which a
// binary-only rebuild's "+b1" (in changelog.Debian.ARCH.gz) leaves out.
func changelogVersion(name string) (string, error) {
	return scanFile(name, func(r io.Reader) (string, error) {
		z, err := gzip.NewReader(r)
		if err != nil {
			return "", err
		}
		first, err := bufio.NewReader(z).ReadString('\n')
		if err != nil && first == "" {
			return "", err
		}
		_, rest, ok1 := strings.Cut(first, " (")
		version, _, ok2 := strings.Cut(rest, ")")
		if !ok1 || !ok2 || version == "" {
			return "", fmt.Errorf("no version in its first line %q", strings.TrimSpace(first))
		}
		return version, nil
	})
}

// guestTools are the programs that init runs in the guest's root to wire
// its network, by their path there.
type guestTools struct {
	ip, rdma string
}

// findTools looks ip and rdma up in root, in the order a merged-/usr root
// such as Debian 12's finds them (/usr/sbin/ip, /usr/bin/rdma); Debian 11
// has no merged /usr and its ip is /bin/ip.
func findTools(root string) (guestTools, error) {
	find := func(name string) (string, error) {
		dirs := []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}
		for _, d := range dirs {
			p := path.Join(d, name)
			if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("guest root %s has no %s in %s (it needs iproute2)", root, name, strings.Join(dirs, ", "))
	}
	ip, err := find("ip")
	if err != nil {
		return guestTools{}, err
	}
	rdma, err := find("rdma")
	return guestTools{ip: ip, rdma: rdma}, err
}

// prepareRoot checks that root can be the guest's root and makes the
// working directory's mount point inside it (the guest sees the root
// read-only, so it cannot make it itself; under /tmp and /run, where the
// guest mounts tmpfs, it can and does), and returns the tools init runs
// there.
func prepareRoot(root, workdir string) (guestTools, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return guestTools{}, fmt.Errorf("guest root: %w", err)
	}
	if !fi.IsDir() {
		return guestTools{}, fmt.Errorf("guest root %s is not a directory", root)
	}
	for _, p := range []string{"bin/sh", "usr/bin/env", "tmp", "proc", "sys", "dev", "run"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return guestTools{}, fmt.Errorf("guest root %s is not a root filesystem: %w", root, err)
		}
	}
	if !underTmpfs(workdir) {
		if err := os.MkdirAll(filepath.Join(root, workdir), 0o755); err != nil {
			return guestTools{}, fmt.Errorf("the working directory's mount point in the guest root: %w", err)
		}
	}
	return findTools(root)
}

// underTmpfs reports whether dir is on one of the tmpfs mounts init puts on
// the guest's root.
func underTmpfs(dir string) bool {
	for _, t := range []string{"/tmp", "/run"} {
		if dir == t || strings.HasPrefix(dir, t+"/") {
			return true
		}
	}
	return false
}
