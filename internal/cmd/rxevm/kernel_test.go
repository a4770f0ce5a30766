package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeApt puts stand-ins for apt-cache and apt-get first on PATH, serving
// the kernel packages named in have: apt-cache madison and pkgnames answer
// from it, apt-get download copies a .deb built with dpkg-deb holding
// boot/vmlinuz-V and lib/modules/V for V from the name, and fails for a
// name not in have, as apt does. apt-get update replaces the lists (the
// file "have" beside the log) with the file "have.updated" there, when a
// test wrote one. Every call is appended to the log it returns.
func fakeApt(t *testing.T, have ...string) (log string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: rxevm runs apt-get through sudo otherwise")
	}
	for _, tool := range []string{"dpkg-deb", "dpkg", "depmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (Debian's dpkg and kmod) to unpack a kernel package", tool)
		}
	}
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	debs := filepath.Join(dir, "debs")
	for _, name := range have {
		v := strings.TrimPrefix(name, "linux-image-")
		pkg := filepath.Join(dir, "pkg", name)
		writeFiles(t, pkg, map[string]string{
			"DEBIAN/control":                      "Package: " + name + "\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: test kernel\n",
			"boot/vmlinuz-" + v:                   "kernel",
			"lib/modules/" + v + "/modules.order": "",
		})
		if err := os.MkdirAll(debs, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("dpkg-deb", "--build", "--root-owner-group", pkg, filepath.Join(debs, name+"_1_amd64.deb")).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb: %v\n%s", err, out)
		}
	}
	writeFiles(t, dir, map[string]string{
		"have": strings.Join(have, "\n") + "\n",
		"bin/apt-cache": `#!/bin/sh
echo "apt-cache $*" >> ` + log + `
case $1 in
madison) grep -qx "$2" ` + dir + `/have && echo "$2 | 1 | fake main amd64 Packages"; exit 0;;
pkgnames) grep "^$2" ` + dir + `/have; exit 0;;
esac
exit 1
`,
		"bin/apt-get": `#!/bin/sh
echo "apt-get $*" >> ` + log + `
while [ "$1" = -o ]; do shift 2; done
case $1 in
update) [ -f ` + dir + `/have.updated ] && cp ` + dir + `/have.updated ` + dir + `/have; exit 0;;
download) grep -qx "$2" ` + dir + `/have && cp ` + debs + `/"$2"_1_amd64.deb . && exit 0
	echo "E: Can't select candidate version from package $2 as it has no candidate" >&2; exit 100;;
esac
exit 1
`,
	})
	t.Setenv("PATH", filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	return log
}

func TestEnsurePinnedKernel(t *testing.T) {
	const (
		pin = "linux-image-6.1.0-56-amd64"
		k57 = "linux-image-6.1.0-57-amd64"
		k58 = "linux-image-6.1.0-58-amd64"
	)
	ctx := context.Background()
	boot := func(t *testing.T, cache string) (kernel, string, error) {
		var out bytes.Buffer
		k, err := (&host{log: &out}).ensurePinnedKernel(ctx, cache, pin)
		return k, out.String(), err
	}

	t.Run("pinned, in the archive", func(t *testing.T) {
		fakeApt(t, pin, k57)
		k, said, err := boot(t, t.TempDir())
		if err != nil || !strings.HasSuffix(k.vmlinuz, "vmlinuz-6.1.0-56-amd64") || strings.Contains(said, "no longer") {
			t.Fatalf("got %+v, %v, log %q; want the pinned kernel, nothing said of another", k, err, said)
		}
	})

	t.Run("pinned, gone: the newest of the series", func(t *testing.T) {
		fakeApt(t, k57, k58, "linux-image-6.1.0-59-rt-amd64")
		cache := t.TempDir()
		k, said, err := boot(t, cache)
		if err != nil || !strings.HasSuffix(k.vmlinuz, "vmlinuz-6.1.0-58-amd64") {
			t.Fatalf("got %+v, %v; want %s", k, err, k58)
		}
		if !strings.Contains(said, pin+" is no longer in the Debian archive: booting "+k58) {
			t.Errorf("log %q does not say which kernel replaced the pin", said)
		}
		if _, err := openKernel(filepath.Join(cache, k58)); err != nil {
			t.Errorf("%s not kept in the cache: %v", k58, err)
		}
	})

	t.Run("pinned, lists stale: updated, then the pin", func(t *testing.T) {
		// A machine image's lists, made before the pin was published: the
		// archive has it, and only an update shows it.
		log := fakeApt(t, pin, k57)
		writeFiles(t, filepath.Dir(log), map[string]string{"have": k57 + "\n", "have.updated": pin + "\n" + k57 + "\n"})
		k, said, err := boot(t, t.TempDir())
		if err != nil || !strings.HasSuffix(k.vmlinuz, "vmlinuz-6.1.0-56-amd64") || strings.Contains(said, "no longer") {
			t.Fatalf("got %+v, %v, log %q; want the pinned kernel after an update, nothing said of another", k, err, said)
		}
		if calls := lines(t, log); !slices.ContainsFunc(calls, func(c string) bool { return strings.HasSuffix(c, " update") }) {
			t.Errorf("apt calls %q: no apt-get update before giving up the pin", calls)
		}
	})

	t.Run("pinned, gone, nothing in the archive: the cache's newest", func(t *testing.T) {
		fakeApt(t)
		cache := t.TempDir()
		for _, v := range []string{"6.1.0-57-amd64", "6.1.0-58-amd64"} {
			writeFiles(t, filepath.Join(cache, "linux-image-"+v, "root"), map[string]string{
				"boot/vmlinuz-" + v: "kernel", "lib/modules/" + v + "/modules.dep": "",
			})
		}
		k, _, err := boot(t, cache)
		if err != nil || !strings.HasSuffix(k.vmlinuz, "vmlinuz-6.1.0-58-amd64") {
			t.Fatalf("got %+v, %v; want the cached %s", k, err, k58)
		}
	})

	t.Run("pinned, in the archive, download fails: that error", func(t *testing.T) {
		log := fakeApt(t, k57)
		// madison knows the pin, download does not have it: a failure other
		// than the archive dropping the package, which no other kernel hides.
		writeFiles(t, filepath.Dir(log), map[string]string{"have": k57 + "\n" + pin + "\n"})
		_, said, err := boot(t, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "no candidate") || strings.Contains(said, "booting") {
			t.Fatalf("got %v, log %q; want the download's error and no other kernel", err, said)
		}
	})

	t.Run("nothing anywhere: says so", func(t *testing.T) {
		fakeApt(t)
		_, _, err := boot(t, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "nor of another linux-image-6.1.0-N-amd64") {
			t.Fatalf("got %v; want an error naming what was looked for", err)
		}
	})

	t.Run("pinned, cached: apt not asked", func(t *testing.T) {
		log := fakeApt(t)
		cache := t.TempDir()
		writeFiles(t, filepath.Join(cache, pin, "root"), map[string]string{
			"boot/vmlinuz-6.1.0-56-amd64": "kernel", "lib/modules/6.1.0-56-amd64/modules.dep": "",
		})
		if _, _, err := boot(t, cache); err != nil {
			t.Fatal(err)
		}
		if calls := lines(t, log); len(calls) > 0 {
			t.Errorf("apt called for a cached kernel: %q", calls)
		}
	})
}
