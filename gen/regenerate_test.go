package gen_test

import (
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// regenerateBoth is a full regeneration as the project does it: the pinned
// 44.0 set (packages with stubs and the layout package) and the 56.1 set
// (layout only, as the version comparison builds it), in memory.
func regenerateBoth(tb testing.TB, h44, h56 string) []*gen.Result {
	tb.Helper()
	full := fullConfig(h44, tb.TempDir())
	layoutOnly := fullConfig(h56, tb.TempDir())
	layoutOnly.LayoutOnly = true
	var res []*gen.Result
	for _, cfg := range []gen.Config{full, layoutOnly} {
		r, err := gen.Build(cfg)
		if err != nil {
			tb.Fatalf("%s: %v", cfg.Headers, err)
		}
		res = append(res, r)
	}
	return res
}

// BenchmarkRegenerate times a full regeneration of both pinned header sets:
//
//	go test ./gen -run '^$' -bench Regenerate -benchtime 3x
func BenchmarkRegenerate(b *testing.B) {
	h44, h56 := pinnedHeaders(b, "44.0"), pinnedHeaders(b, "56.1")
	b.ReportAllocs()
	for b.Loop() {
		regenerateBoth(b, h44, h56)
	}
}

// TestRegenerate runs the benchmark's work once and checks what it made;
// it asserts nothing about time (BenchmarkRegenerate measures that).
func TestRegenerate(t *testing.T) {
	h44, h56 := pinnedHeaders(t, "44.0"), pinnedHeaders(t, "56.1")
	res := regenerateBoth(t, h44, h56)
	for i, want := range [][]string{
		{"verbs/zverbs_types.go", "verbs/zverbs_funcs.go", "verbs/zverbs_load.c", "verbs/zverbs_names.h",
			"rdmacm/zrdmacm_types.go", "rdmacm/zrdmacm_funcs.go", "rdmacm/zrdmacm_load.c", "rdmacm/zrdmacm_names.h",
			"layout/zlayout_rows.h", "layout/zlayout_c.go", "layout/zlayout_go.go", "layout/zlayout_test.go"},
		{"verbs/zverbs_types.go", "rdmacm/zrdmacm_types.go",
			"layout/zlayout_rows.h", "layout/zlayout_c.go", "layout/zlayout_go.go", "layout/zlayout_test.go"},
	} {
		got := paths(res[i].Files)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: emitted %v, want %v", res[i].IR.Version, got, want)
		}
		for _, f := range res[i].Files {
			if len(f.Data) == 0 {
				t.Errorf("%s: %s is empty", res[i].IR.Version, f.Path)
			}
		}
	}
	if v := res[0].IR.Version + " " + res[1].IR.Version; v != "44.0 56.1" {
		t.Errorf("versions %q, want \"44.0 56.1\"", v)
	}
}
