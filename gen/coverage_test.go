package gen_test

import (
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// TestCoverage checks, on the pinned 44.0 headers, the counts the project
// is judged by: the data-path seed functions are all generated, the public
// function-like macros are stubs, and every skipped declaration says why.
func TestCoverage(t *testing.T) {
	headers := pinnedHeaders(t, "44.0")
	res, err := gen.Build(fullConfig(headers, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ir := res.IR

	funcs := map[string]*gen.Func{}
	kinds := map[gen.FuncKind]int{}
	for _, f := range ir.Funcs {
		funcs[f.Name] = f
		kinds[f.Kind]++
	}
	skipped := map[string]gen.Skip{}
	for _, s := range ir.Skipped {
		skipped[s.Name] = s
		if strings.TrimSpace(s.Reason) == "" {
			t.Errorf("skipped %s %s (%s) without a reason", s.Kind, s.Name, s.Pos)
		}
	}

	seeds := []string{"ibv_post_recv", "ibv_post_srq_recv", "ibv_post_send", "rdma_post_recvv", "rdma_post_readv"}
	seedSkips := 0
	for _, name := range seeds {
		if s, ok := skipped[name]; ok {
			seedSkips++
			t.Errorf("seed function %s skipped: %s", name, s.Reason)
		}
		if funcs[name] == nil {
			t.Errorf("seed function %s is not in IR.Funcs", name)
		} else if funcs[name].GoName == "" || funcs[name].Package == "" {
			t.Errorf("seed function %s has no Go name or package", name)
		}
	}
	for _, name := range []string{"ibv_reg_mr", "ibv_query_port"} {
		f := funcs[name]
		switch {
		case f == nil:
			t.Errorf("function-like macro %s has no stub (skipped: %q)", name, skipped[name].Reason)
		case f.Kind != gen.FuncMacro:
			t.Errorf("%s is generated as a %s, want a function-like macro stub", name, f.Kind)
		case f.Target == "":
			t.Errorf("%s: macro stub without the function it expands to", name)
		}
	}
	for _, name := range []string{"ibv_poll_cq", "ibv_wr_send", "ibv_start_poll"} {
		if f := funcs[name]; f == nil || f.Kind != gen.FuncInline {
			t.Errorf("static inline %s is not generated as one", name)
		}
	}

	records := 0
	for _, r := range ir.Records {
		if !r.System {
			records++
		}
	}
	consts := 0
	for _, e := range ir.Enums {
		consts += len(e.Enumerators)
	}
	t.Logf("rdma-core %s: %d structs/unions, %d enums (%d constants), %d integer macros, %d aliases",
		ir.Version, records, len(ir.Enums), consts, len(ir.Macros), len(ir.Aliases))
	t.Logf("functions: %d (%d extern, %d static inline, %d function-like macros)",
		len(ir.Funcs), kinds[gen.FuncExtern], kinds[gen.FuncInline], kinds[gen.FuncMacro])
	t.Logf("skipped: %d overall, %d among the %d seed functions", len(ir.Skipped), seedSkips, len(seeds))
	for _, s := range ir.Skipped {
		t.Logf("  skipped %s %s (%s): %s", s.Kind, s.Name, s.Pos, s.Reason)
	}
}
