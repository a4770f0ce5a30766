package versions

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/gen"
	"github.com/goverbs/goverbs/tests/internal/scratch"
	"github.com/stretchr/testify/require"
)

// pinnedReleases are the pinned rdma-core releases (headers/manifest.tsv), oldest first.
var pinnedReleases = []string{"33.2", "44.0", "56.1", "65.0"}

const vendoredInclude = repo + "/headers/vendored/include"

// loadIR reads a header tree the way the generator does (Load, then Model).
func loadIR(t *testing.T, dir, version string) *gen.IR {
	t.Helper()
	l, err := gen.Load(dir, gen.Roots)
	require.NoError(t, err, "loading %s", dir)
	ir, err := gen.Model(l)
	require.NoError(t, err, "modelling %s", dir)
	ir.Version = version
	return ir
}

// loadPinned loads every pinned release and the vendored headers, in parallel.
func loadPinned(t *testing.T) (irs map[string]*gen.IR, vendoredIR *gen.IR) {
	t.Helper()
	dirs := map[string]string{}
	for _, v := range pinnedReleases {
		dirs[v] = repo + "/headers/rdma-core-" + v
	}
	scratch.RequireTrees(t, append(mapValues(dirs), vendoredInclude)...)
	version, err := os.ReadFile(repo + "/headers/vendored/VERSION")
	require.NoError(t, err)
	vendoredVersion := strings.TrimSpace(string(version))

	irs = map[string]*gen.IR{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := map[string]error{}
	load := func(key, dir, version string) {
		defer wg.Done()
		l, err := gen.Load(dir, gen.Roots)
		var ir *gen.IR
		if err == nil {
			ir, err = gen.Model(l)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs[key] = err
			return
		}
		ir.Version = version
		irs[key] = ir
	}
	for v, d := range dirs {
		wg.Add(1)
		go load(v, d, v)
	}
	wg.Add(1)
	go load("vendored", vendoredInclude, vendoredVersion+" (vendored)")
	wg.Wait()
	for k, err := range errs {
		t.Fatalf("loading %s: %v", k, err)
	}
	vendoredIR = irs["vendored"]
	delete(irs, "vendored")
	return irs, vendoredIR
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestGrowthPinned checks rdma-core's ABI promise over every pinned release:
// each older release against the vendored headers the committed packages are
// generated from (65.0's own tree included, a check of the vendored copy),
// and each release against the next. Every record and member of the older
// release must keep its offset (verbs_context: relative to its embedded
// ibv_context) and size, no record may shrink, and every enumerator keeps
// its value. Every violation is listed; reserved bytes taken over by new
// members are allowed and logged.
func TestGrowthPinned(t *testing.T) {
	start := time.Now()
	irs, vend := loadPinned(t)
	t.Logf("loaded %d pinned releases and the vendored headers (%s) in %v", len(irs), vend.Version, time.Since(start).Round(time.Millisecond))

	type pair struct{ old, cur *gen.IR }
	var pairs []pair
	for _, v := range pinnedReleases {
		pairs = append(pairs, pair{irs[v], vend})
	}
	for i := 0; i+1 < len(pinnedReleases); i++ {
		pairs = append(pairs, pair{irs[pinnedReleases[i]], irs[pinnedReleases[i+1]]})
	}
	var failed []string
	for _, p := range pairs {
		t0 := time.Now()
		rep := gen.CheckGrowth(p.old, p.cur, "", "")
		t.Logf("%s (%v)", rep, time.Since(t0).Round(time.Microsecond))
		for _, r := range rep.Reused {
			t.Logf("  reserved bytes reused (allowed): %s", r)
		}
		require.Greater(t, rep.Records, 100, "too few records compared: the headers did not load as expected")
		require.Equal(t, 1, rep.FrontGrowing, "struct verbs_context must be compared relative to its anchor")
		for _, v := range rep.Violations {
			failed = append(failed, v.String())
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d ABI growth violations between pinned releases:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

// TestGrowthCatchesEditedHeader edits a copy of the real 44.0 headers the
// way rdma-core never may: a member inserted in the middle of struct
// ibv_port_attr, or two of its members swapped. The check must name the
// struct, the members that moved, both releases and both offsets.
func TestGrowthCatchesEditedHeader(t *testing.T) {
	src := repo + "/headers/rdma-core-44.0"
	scratch.RequireTrees(t, src)
	old := loadIR(t, src, "44.0")

	const orig = "\tuint8_t\t\t\tinit_type_reply;\n\tuint8_t\t\t\tactive_width;\n\tuint8_t\t\t\tactive_speed;\n"
	for _, tc := range []struct {
		name, edit string
		want       []string
	}{
		{"inserted", "\tuint8_t\t\t\tinit_type_reply;\n\tuint8_t\t\t\tinserted_by_the_test;\n\tuint8_t\t\t\tactive_width;\n\tuint8_t\t\t\tactive_speed;\n", []string{
			"struct ibv_port_attr: member active_width moved from 43 (rdma-core 44.0) to 44 (rdma-core 44.0-edited)",
			"struct ibv_port_attr: member active_speed moved from 44 (rdma-core 44.0) to 45 (rdma-core 44.0-edited)",
			"struct ibv_port_attr: member port_cap_flags2 moved from 48 (rdma-core 44.0) to 50 (rdma-core 44.0-edited)",
		}},
		{"swapped", "\tuint8_t\t\t\tinit_type_reply;\n\tuint8_t\t\t\tactive_speed;\n\tuint8_t\t\t\tactive_width;\n", []string{
			"struct ibv_port_attr: member active_width moved from 43 (rdma-core 44.0) to 44 (rdma-core 44.0-edited)",
			"struct ibv_port_attr: member active_speed moved from 44 (rdma-core 44.0) to 43 (rdma-core 44.0-edited)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
			verbs := filepath.Join(dir, "infiniband", "verbs.h")
			b, err := os.ReadFile(verbs)
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(string(b), orig), "struct ibv_port_attr in 44.0 is not as this test expects")
			require.NoError(t, os.WriteFile(verbs, []byte(strings.Replace(string(b), orig, tc.edit, 1)), 0o644))

			rep := gen.CheckGrowth(old, loadIR(t, dir, "44.0-edited"), "", "")
			var got []string
			for _, v := range rep.Violations {
				got = append(got, v.String())
			}
			t.Logf("%s:\n%s", rep, strings.Join(got, "\n"))
			for _, w := range tc.want {
				require.Contains(t, got, w)
			}
			for _, g := range got {
				require.True(t, strings.HasPrefix(g, "struct ibv_port_attr: "), "only ibv_port_attr was edited, yet: %s", g)
			}
		})
	}
}
