// Package fetchsh tests headers/fetch.sh, make headers' downloader of the
// pinned Debian packages, without the network: apt-get, apt-cache and
// apt-config are stand-ins on PATH that serve one small .deb, built here,
// from the suites a test names.
package fetchsh

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The stand-ins read the suite and the archive URI from the private sources
// file that APT_CONFIG leads to, log each call to FAKE_APT_LOG as
// "COMMAND SUITE URI ARGS", and serve FAKE_APT_DEB (package FAKE_APT_PKG,
// version FAKE_APT_VER) only from the suites in FAKE_APT_SERVES; the other
// suites list FAKE_APT_OTHER instead, if set. apt-get update fails for the
// suites in FAKE_APT_UPDATE_FAILS.
const fakeAptPrelude = `#!/bin/sh
parts=$(sed -n 's/^Dir::Etc::SourceParts "\(.*\)";$/\1/p' "$APT_CONFIG")
suite=$(sed -n 's/^Suites: //p' "$parts/debian.sources")
uri=$(sed -n 's/^URIs: //p' "$parts/debian.sources")
echo "$(basename "$0") $suite $uri $*" >> "$FAKE_APT_LOG"
serves=no
for s in $FAKE_APT_SERVES; do [ "$s" = "$suite" ] && serves=yes; done
`

const fakeAptGet = fakeAptPrelude + `
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
case $1 in
update)
	for s in $FAKE_APT_UPDATE_FAILS; do
		[ "$s" = "$suite" ] && { echo "E: The repository '$uri $suite Release' does not have a Release file." >&2; exit 100; }
	done
	exit 0 ;;
download)
	if [ $serves = yes ] && [ "$2" = "$FAKE_APT_PKG=$FAKE_APT_VER" ]; then
		cp "$FAKE_APT_DEB" "./${FAKE_APT_PKG}_${FAKE_APT_VER}_amd64.deb"
		exit 0
	fi
	echo "E: Can't find a source to download version '${2#*=}' of '${2%%=*}:amd64'" >&2
	exit 100 ;;
esac
exit 100
`

const fakeAptCache = fakeAptPrelude + `
[ "$1" = madison ] && [ "$2" = "$FAKE_APT_PKG" ] || exit 0
if [ $serves = yes ]; then
	echo " $2 | $FAKE_APT_VER | $uri $suite/main amd64 Packages"
elif [ -n "$FAKE_APT_OTHER" ]; then
	echo " $2 | $FAKE_APT_OTHER | $uri $suite/main amd64 Packages"
fi
`

const (
	pkg = "libibverbs-dev"
	ver = "65.0-1.1"
)

// world is one run's setup: a copy of fetch.sh (trees go beside it), a
// keyring, the .deb and the stand-ins.
type world struct {
	dir, script, deb, sum, log string
	bin                        string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found (fetch.sh needs it)", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
	w := &world{dir: t.TempDir()}
	src, err := os.ReadFile("../../headers/fetch.sh")
	if err != nil {
		t.Fatal(err)
	}
	w.script = filepath.Join(w.dir, "headers", "fetch.sh")
	write(t, w.script, string(src), 0o755)

	// A package with the two headers fetch.sh requires in every tree.
	root := filepath.Join(w.dir, "pkgroot")
	write(t, filepath.Join(root, "DEBIAN", "control"), "Package: "+pkg+"\nVersion: "+ver+
		"\nArchitecture: amd64\nMaintainer: Test <test@invalid>\nDescription: test package\n", 0o644)
	write(t, filepath.Join(root, "usr", "include", "infiniband", "verbs.h"), "/* verbs */\n", 0o644)
	write(t, filepath.Join(root, "usr", "include", "rdma", "rdma_cma.h"), "/* cma */\n", 0o644)
	w.deb = filepath.Join(w.dir, "test.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, w.deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	b, err := os.ReadFile(w.deb)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	w.sum = hex.EncodeToString(h[:])

	// The keyring check reads user IDs as text.
	write(t, filepath.Join(w.dir, "keyring.gpg"), "Debian Archive Automatic Signing Key (12/bookworm)\n", 0o644)
	w.bin = filepath.Join(w.dir, "bin")
	write(t, filepath.Join(w.bin, "apt-get"), fakeAptGet, 0o755)
	write(t, filepath.Join(w.bin, "apt-cache"), fakeAptCache, 0o755)
	write(t, filepath.Join(w.bin, "apt-config"), "#!/bin/sh\nexit 0\n", 0o755)
	w.log = filepath.Join(w.dir, "apt.log")
	return w
}

func write(t *testing.T, name, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// run runs fetch.sh for rdma-core 65.0 pinned at pkg=ver in suite with
// sha256 sum, fails t unless it exits with wantRC, and returns its output
// and the stand-ins' log.
func (w *world) run(t *testing.T, wantRC int, suite, sum string, env ...string) (out, log string) {
	t.Helper()
	manifest := filepath.Join(w.dir, "manifest.tsv")
	write(t, manifest, "# version\tsuite\tpackage\tdebversion\tsha256\n65.0\t"+suite+"\t"+pkg+"\t"+ver+"\t"+sum+"\n", 0o644)
	cmd := exec.Command("bash", w.script)
	cmd.Env = append(os.Environ(),
		"PATH="+w.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HEADERS_MANIFEST="+manifest,
		"HEADERS_CACHE="+filepath.Join(w.dir, "cache"),
		"HEADERS_KEYRING="+filepath.Join(w.dir, "keyring.gpg"),
		"HEADERS_DEBIAN_MIRROR=fake:/debian",
		"HEADERS_DEBIAN_SECURITY_MIRROR=fake:/debian-security",
		"FAKE_APT_LOG="+w.log,
		"FAKE_APT_DEB="+w.deb,
		"FAKE_APT_PKG="+pkg,
		"FAKE_APT_VER="+ver,
		"FAKE_APT_SERVES=", "FAKE_APT_OTHER=", "FAKE_APT_UPDATE_FAILS=",
	)
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	l, _ := os.ReadFile(w.log)
	out, log = string(b), string(l)
	if rc != wantRC {
		t.Fatalf("exit status %d, want %d; output:\n%s\napt calls:\n%s", rc, wantRC, out, log)
	}
	return out, log
}

// requireLines fails t for each of wants that out lacks.
func requireLines(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func (w *world) tree() string { return filepath.Join(w.dir, "headers", "rdma-core-65.0") }

// A sid pin that sid no longer lists is fetched from testing, where it
// migrated, and its sha256 is checked as before.
func TestFetchFromTesting(t *testing.T) {
	w := newWorld(t)
	out, log := w.run(t, 0, "sid", w.sum, "FAKE_APT_SERVES=forky", "FAKE_APT_OTHER=66.0-1")
	if !strings.Contains(log, "apt-get forky fake:/debian -q download "+pkg+"="+ver) {
		t.Errorf("not downloaded from forky; apt calls:\n%s", log)
	}
	if !strings.Contains(out, "sid does not list "+pkg+" "+ver+"; forky does") {
		t.Errorf("output does not say the pin is borrowed from forky:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(w.tree(), "infiniband", "verbs.h")); err != nil {
		t.Errorf("tree not extracted: %v\noutput:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(w.tree(), ".stamp")); err != nil {
		t.Errorf("no stamp: %v", err)
	}
}

// The same bytes are wanted from whichever suite: a .deb from testing whose
// sha256 is not the manifest's fails as a mismatch, and no tree is made.
func TestFetchFromTestingChecksSum(t *testing.T) {
	w := newWorld(t)
	bad := strings.Repeat("0", 64)
	out, _ := w.run(t, 1, "sid", bad, "FAKE_APT_SERVES=forky")
	if want := "sha256 mismatch for " + pkg + "_" + ver + "_amd64.deb: want " + bad + " got " + w.sum; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if _, err := os.Stat(w.tree()); !os.IsNotExist(err) {
		t.Errorf("a tree was made (%v)", err)
	}
	if files, _ := filepath.Glob(filepath.Join(w.dir, "cache", "debs", "*")); len(files) > 0 {
		t.Errorf("the mismatching .deb entered the cache: %v", files)
	}
}

// A release pin that is only in its -security suite is fetched from the
// security archive.
func TestFetchFromSecurity(t *testing.T) {
	w := newWorld(t)
	_, log := w.run(t, 0, "bookworm", w.sum, "FAKE_APT_SERVES=bookworm-security")
	if !strings.Contains(log, "apt-get bookworm-security fake:/debian-security -q download "+pkg+"="+ver) {
		t.Errorf("not downloaded from the security archive; apt calls:\n%s", log)
	}
}

// A pin that no suite lists fails saying which package, which version and
// which suites were tried, what each lists, and how to move the pin, without
// apt-get download's error.
func TestNotInArchive(t *testing.T) {
	w := newWorld(t)
	out, log := w.run(t, 1, "sid", w.sum, "FAKE_APT_OTHER=66.0-1")
	requireLines(t, out,
		pkg+" "+ver+" (rdma-core 65.0, suite sid in "+filepath.Join(w.dir, "manifest.tsv")+") is in none of the suites tried: sid forky",
		"sid: index lists "+pkg+" 66.0-1",
		"forky: index lists "+pkg+" 66.0-1",
		"the pin has to move",
		"the .deb's sha256",
		"make headers",
		"make vendor-headers",
		"make check-generated",
	)
	if strings.Contains(out, "Can't find a source") || strings.Contains(log, "download") {
		t.Errorf("a download was tried; output:\n%s\napt calls:\n%s", out, log)
	}
}

// For a release, every suite where the version may live on is tried, and a
// suite whose index cannot be read is reported as that, not as a pin that
// has to move.
func TestNotInArchiveRelease(t *testing.T) {
	w := newWorld(t)
	out, _ := w.run(t, 1, "bookworm", w.sum, "FAKE_APT_UPDATE_FAILS=trixie")
	requireLines(t, out,
		"is in none of the suites tried: bookworm bookworm-updates bookworm-security bookworm-proposed-updates trixie",
		"bookworm-security: index lists no "+pkg,
		"trixie: apt-get update failed",
		"the pin has to move",
	)
}

// When no suite's index can be read, the failure says that the network or
// mirror, not the pin, is at fault.
func TestNoIndex(t *testing.T) {
	w := newWorld(t)
	out, _ := w.run(t, 1, "sid", w.sum, "FAKE_APT_UPDATE_FAILS=sid forky")
	if !strings.Contains(out, "no suite's index could be read") || strings.Contains(out, "the pin has to move") {
		t.Errorf("output does not blame the index alone:\n%s", out)
	}
}
