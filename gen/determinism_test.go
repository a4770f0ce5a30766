package gen_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/gen"
)

// TestDeterministicBuild builds the pinned 44.0 set twice: every file must
// come out byte for byte the same (cc/v4 keeps declarations in Go maps, so
// any ordering that leaks from them shows up here).
func TestDeterministicBuild(t *testing.T) {
	headers := pinnedHeaders(t, "44.0")
	cfg := fullConfig(headers, t.TempDir())
	a, err := gen.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gen.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != len(b.Files) {
		t.Fatalf("first build emitted %v, second %v", paths(a.Files), paths(b.Files))
	}
	for i := range a.Files {
		fa, fb := a.Files[i], b.Files[i]
		if fa.Path != fb.Path {
			t.Errorf("file %d: %s, then %s", i, fa.Path, fb.Path)
			continue
		}
		if d := lineDiff(fa.Data, fb.Data); d != "" {
			t.Errorf("%s differs between two builds: %s", fa.Path, d)
		}
	}
	if len(a.Files) < 7 { // two packages, types and stubs each, and three layout files
		t.Errorf("only %d files emitted: %v", len(a.Files), paths(a.Files))
	}
}

// TestRunIdempotent writes the 44.0 output into a temporary directory twice:
// the second run changes nothing, not even a modification time. Then one
// damaged file is the only one the next run rewrites.
func TestRunIdempotent(t *testing.T) {
	headers := pinnedHeaders(t, "44.0")
	dir := t.TempDir()
	cfg := fullConfig(headers, dir)
	res, err := gen.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != len(res.Files) {
		t.Fatalf("first run into an empty directory changed %d of %d files", len(res.Changed), len(res.Files))
	}
	// Back-date every file so that a rewrite is visible whatever the file
	// system's timestamp resolution.
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	backdate(t, dir, past)
	before := snapshot(t, dir)

	res, err = gen.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 0 {
		t.Errorf("second run reports %d changed files, want 0: %v", len(res.Changed), res.Changed)
	}
	compareSnapshots(t, before, snapshot(t, dir))

	damaged := filepath.Join(cfg.Out, "verbs", "zverbs_types.go")
	if err := os.WriteFile(damaged, []byte("package verbs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	backdate(t, dir, past)
	res, err = gen.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 1 || res.Changed[0] != damaged {
		t.Errorf("after damaging %s, the run changed %v", damaged, res.Changed)
	}
	after := snapshot(t, dir)
	for p, e := range before {
		if e.mode.IsDir() {
			continue // a rename into a directory updates its mtime
		}
		if p == damaged {
			if !bytes.Equal(after[p].data, e.data) {
				t.Errorf("%s was not restored", p)
			}
			continue
		}
		if !after[p].mtime.Equal(e.mtime) {
			t.Errorf("%s was rewritten though it did not change", p)
		}
	}
}

type fileState struct {
	data  []byte
	mode  fs.FileMode
	mtime time.Time
}

// snapshot records every file and directory under root.
func snapshot(t *testing.T, root string) map[string]fileState {
	t.Helper()
	s := map[string]fileState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{mode: fi.Mode(), mtime: fi.ModTime()}
		if !d.IsDir() {
			if st.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		s[p] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func compareSnapshots(t *testing.T, before, after map[string]fileState) {
	t.Helper()
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			t.Errorf("%s was removed", p)
		case !bytes.Equal(a.data, b.data):
			t.Errorf("%s changed content", p)
		case a.mode != b.mode:
			t.Errorf("%s changed mode: %v -> %v", p, b.mode, a.mode)
		case !a.mtime.Equal(b.mtime):
			t.Errorf("%s changed modification time: %v -> %v", p, b.mtime, a.mtime)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}

func backdate(t *testing.T, root string, when time.Time) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeterministicSameLine builds, many times, a header that declares
// several functions on one line (and several in one declaration): cc/v4
// hands them over in map order, and only a total order on them (file, line,
// column, then name) makes every build emit the same bytes.
func TestDeterministicSameLine(t *testing.T) {
	headers := includeDir(t, map[string]string{
		"infiniband/verbs.h": "int ibv_f1(int a); int ibv_f2(int b); int ibv_f3(int c); int ibv_f4(int d);\n" +
			"int ibv_g1(void), ibv_g2(void), ibv_g3(void), ibv_g4(void);\n" +
			"int ibv_v1(int a, ...); int ibv_v2(int a, ...); int ibv_v3(int a, ...);\n",
		"rdma/rdma_verbs.h": "",
		"rdma/rdma_cma.h":   "",
	})
	cfg := gen.Config{
		Headers: headers, ImportRoot: "example.com/generated", Version: "1.0", Command: "verbsgen (gen test)",
		Conventions: []gen.ConventionRule{{Name: "all", Convention: gen.CannotFail, Funcs: []string{"ibv_*"}}},
	}
	first, err := gen.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var report bytes.Buffer
	gen.Report(&report, first.IR)
	for i := 0; i < 20; i++ {
		again, err := gen.Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var r bytes.Buffer
		gen.Report(&r, again.IR)
		if d := lineDiff(report.Bytes(), r.Bytes()); d != "" {
			t.Fatalf("build %d: the report differs from the first build's: %s", i+2, d)
		}
		if len(again.Files) != len(first.Files) {
			t.Fatalf("build %d emitted %v, the first %v", i+2, paths(again.Files), paths(first.Files))
		}
		for j, f := range again.Files {
			if f.Path != first.Files[j].Path || !bytes.Equal(f.Data, first.Files[j].Data) {
				t.Fatalf("build %d: %s differs from the first build's: %s", i+2, f.Path, lineDiff(first.Files[j].Data, f.Data))
			}
		}
	}
	for _, want := range []string{"ibv_f1 (infiniband/verbs.h:1)", "skipped function ibv_v1"} {
		if !bytes.Contains(report.Bytes(), []byte(want)) {
			t.Errorf("the report lacks %q:\n%s", want, report.String())
		}
	}
}
