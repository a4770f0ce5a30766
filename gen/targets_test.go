package gen_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// needCompilers skips the test unless the Debian compilers of both targets
// are installed (make deps installs them).
func needCompilers(t *testing.T, ts []gen.Target) {
	t.Helper()
	for _, tg := range ts {
		if _, err := exec.LookPath(tg.CC); err != nil {
			t.Skipf("%s needs %s (make deps): %v", tg.Name(), tg.CC, err)
		}
	}
}

func TestParseTargets(t *testing.T) {
	ts, err := gen.ParseTargets("linux/amd64, linux/arm64")
	if err != nil || len(ts) != 2 || ts[0].GOARCH != "amd64" || ts[1].GOARCH != "arm64" {
		t.Fatalf("ParseTargets: %v, %v", ts, err)
	}
	for _, bad := range []string{"linux/riscv64", "linux/amd64,linux/amd64", ""} {
		if _, err := gen.ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q): no error", bad)
		}
	}
}

// TestTargetsSplit generates the records case for amd64 and arm64: the
// glibc mutex (40 bytes on amd64, 48 on arm64) and every record holding one
// go in the per-architecture files, everything else in the common one, and
// the preamble asserts each architecture's layout under its own #if.
func TestTargetsSplit(t *testing.T) {
	ts, err := gen.ParseTargets("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	needCompilers(t, ts)
	cfg := goldenConfig("records")
	cfg.Targets = ts
	res, err := gen.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range res.Files {
		files[path.Base(f.Path)] = string(f.Data)
	}
	common, amd64, arm64, funcs := files["zverbs_types.go"], files["zverbs_types_amd64.go"], files["zverbs_types_arm64.go"], files["zverbs_funcs.go"]
	if common == "" || amd64 == "" || arm64 == "" || funcs == "" {
		t.Fatalf("missing files; have %v", keys(files))
	}
	mutex := regexp.MustCompile(`PthreadMutexT mirrors pthread_mutex_t \(bits/pthreadtypes.h:\d+\)\. Size (\d+), align 8\.`)
	for _, c := range []struct{ name, text, size string }{{"amd64", amd64, "40"}, {"arm64", arm64, "48"}} {
		m := mutex.FindStringSubmatch(c.text)
		if m == nil || m[1] != c.size {
			t.Errorf("%s: pthread_mutex_t: got %v, want size %s", c.name, m, c.size)
		}
	}
	if strings.Contains(common, "type PthreadMutexT ") {
		t.Error("pthread_mutex_t is in the common file")
	}
	for _, same := range []string{"type PthreadCondT ", "type Timespec "} {
		if !strings.Contains(common, same) || strings.Contains(amd64, same) || strings.Contains(arm64, same) {
			t.Errorf("%s: want it in the common file only", same)
		}
	}
	amdAt := strings.Index(funcs, "#if defined(__x86_64__)")
	armAt := strings.Index(funcs, "#elif defined(__aarch64__)")
	endAt := strings.Index(funcs, "#endif")
	if amdAt < 0 || armAt < amdAt || endAt < armAt {
		t.Fatalf("funcs preamble: no #if __x86_64__ / #elif __aarch64__ / #endif blocks")
	}
	if !strings.Contains(funcs[amdAt:armAt], "sizeof(pthread_mutex_t) == 40") || !strings.Contains(funcs[armAt:endAt], "sizeof(pthread_mutex_t) == 48") {
		t.Error("funcs preamble: pthread_mutex_t's size not asserted per architecture")
	}
	if strings.Count(funcs, "sizeof(pthread_cond_t) == 48") != 1 {
		t.Error("funcs preamble: pthread_cond_t (the same on both) should be asserted once, outside the #if")
	}

	again, err := gen.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range again.Files {
		if f.Path != res.Files[i].Path || !bytes.Equal(f.Data, res.Files[i].Data) {
			t.Errorf("%s differs between two runs", f.Path)
		}
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestTargetsSystemHeaders generates for amd64 and arm64 from the machine's
// own /usr/include, as docs/own-headers.md has a user do:
// there the headers directory also holds the host's C library, whose
// headers must still pair with the arm64 ones.
func TestTargetsSystemHeaders(t *testing.T) {
	for _, h := range gen.Roots {
		if _, err := os.Stat(filepath.Join("/usr/include", h)); err != nil {
			t.Skipf("needs rdma-core's headers in /usr/include (apt-get install libibverbs-dev librdmacm-dev): %v", err)
		}
	}
	ts, err := gen.ParseTargets("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	needCompilers(t, ts)
	res, err := gen.Build(gen.Config{Headers: "/usr/include", Version: "system", Targets: ts})
	if err != nil {
		t.Fatal(err)
	}
	var amd64 string
	for _, f := range res.Files {
		if path.Base(f.Path) == "zverbs_types_amd64.go" {
			amd64 = string(f.Data)
		}
	}
	if !strings.Contains(amd64, "pthread_mutex_t (bits/pthreadtypes.h:") {
		t.Errorf("zverbs_types_amd64.go does not name pthread_mutex_t's header as bits/pthreadtypes.h")
	}
}

// TestHostOnlyOtherArch: a package laid out for the host only (no -targets), compiled for the other
// architecture, fails with one #error that names the architectures it has
// and the -targets to regenerate with, not with the static assertions that
// no longer hold there, each telling to regenerate "for these headers".
func TestHostOnlyOtherArch(t *testing.T) {
	host, ok := gen.Targets[runtime.GOOS+"/"+runtime.GOARCH]
	if !ok {
		t.Skipf("verbsgen lays out no %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	other := gen.Targets["linux/arm64"]
	if host.GOARCH == "arm64" {
		other = gen.Targets["linux/amd64"]
	}
	needCompilers(t, []gen.Target{host, other})
	res, err := gen.Build(goldenConfig("records"))
	if err != nil {
		t.Fatal(err)
	}
	var funcs string
	for _, f := range res.Files {
		if path.Base(f.Path) == "zverbs_funcs.go" {
			funcs = string(f.Data)
		}
	}
	start, end := strings.Index(funcs, "\n/*\n"), strings.Index(funcs, "*/\nimport \"C\"")
	if start < 0 || end < start {
		t.Fatal("zverbs_funcs.go: no cgo preamble")
	}
	var pre strings.Builder
	for _, l := range strings.SplitAfter(funcs[start+4:end], "\n") {
		if !strings.HasPrefix(l, "#cgo ") {
			pre.WriteString(l)
		}
	}
	src := filepath.Join(t.TempDir(), "preamble.c")
	if err := os.WriteFile(src, []byte(pre.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	compile := func(tg gen.Target) (string, error) {
		out, err := exec.Command(tg.CC, "-fsyntax-only", "-I", filepath.Join("testdata", "records", "include"), src).CombinedOutput()
		return string(out), err
	}
	if out, err := compile(host); err != nil {
		t.Fatalf("%s: the preamble does not compile for the architecture it was laid out for: %v\n%s", host.CC, err, out)
	}
	out, err := compile(other)
	want := "goverbs: package verbs has layouts for " + host.Name() + " only: regenerate it with verbsgen -targets linux/amd64,linux/arm64"
	if err == nil || !strings.Contains(out, want) || strings.Contains(out, "static assertion failed") {
		t.Errorf("%s: want the one error %q, got (%v):\n%s", other.CC, want, err, out)
	}
}
