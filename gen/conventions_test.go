package gen_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// vendoredFuncs is every function of the vendored rdma-core headers (what
// generated/ is made from) with the convention gen.Conventions gives it.
func vendoredFuncs(t *testing.T) map[string]*gen.Func {
	t.Helper()
	ir := modelOf(t, filepath.Join("..", "headers", "vendored", "include"), gen.Roots)
	if err := gen.Names(ir, gen.Packages()); err != nil {
		t.Fatal(err)
	}
	if err := gen.AssignConventions(ir, gen.Conventions); err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*gen.Func{}
	for _, f := range ir.Funcs {
		funcs[f.Name] = f
	}
	return funcs
}

// TestConventionsOfMixedReturns pins the functions whose failures mix
// errnos returned, errno set and codes of their own, as rdma-core's
// sources have them: a rule moved or reordered in gen.Conventions must
// not give them another reading of their result.
func TestConventionsOfMixedReturns(t *testing.T) {
	funcs := vendoredFuncs(t)
	for _, c := range []struct {
		name string
		want gen.Convention
		code bool // NegativeCode
		why  string
	}{
		{"ibv_resolve_eth_l2_from_gid", gen.MinusOneErrno, false,
			"-1 with errno (its ibv_query_gid), or -errno: -1 must read errno"},
		{"ibv_poll_cq", gen.CountOrError, true, "a provider's CQ_POLL_ERR (-2) is no -ENOENT"},
		{"ibv_start_poll", gen.ErrnoResult, true, "a provider's CQ_POLL_ERR (-2) is no -ENOENT, an empty CQ"},
		{"ibv_next_poll", gen.ErrnoResult, true, "a provider's CQ_POLL_ERR (-2) is no -ENOENT, an empty CQ"},
		{"_ibv_query_gid_table", gen.CountOrError, false, "-errno returned"},
		{"ibv_rereg_mr", gen.MinusOneErrno, true, "an IBV_REREG_MR_ERR_* code beside errno: which MR is valid"},
	} {
		f := funcs[c.name]
		if f == nil {
			t.Errorf("%s is not in the vendored headers", c.name)
			continue
		}
		if f.Convention != c.want || f.NegativeCode != c.code || f.Unsupported != "" {
			t.Errorf("%s: convention %q, NegativeCode %v, Unsupported %q (rule %q), want %q, %v: %s",
				c.name, f.Convention, f.NegativeCode, f.Unsupported, f.ConventionRule, c.want, c.code, c.why)
		}
	}
	// ibv_get_device_index(3): -1, no errno, if the kernel does not
	// support device indexes.
	if f := funcs["ibv_get_device_index"]; f == nil || f.Convention != gen.CountOrError ||
		f.Unsupported != "the kernel does not support device indexes" {
		t.Errorf("ibv_get_device_index: %+v, want a count whose -1 says the kernel gives no device indexes", f)
	}
}

// NegativeCode fits only the conventions whose stub can tell a code from
// its failures: not NULL and errno, not an extern (or an inline calling
// one) whose absence reads -1. Unsupported fits a count alone.
func TestNegativeCodeRules(t *testing.T) {
	dir := includeDir(t, map[string]string{"infiniband/verbs.h": `
int ibv_ext_count(void);
struct ibv_x;
struct ibv_x *ibv_make(void);
static inline int ibv_inline_count(void) { return 3; }
static inline int ibv_calls_ext(void) { return ibv_ext_count(); }
`})
	ir := modelOf(t, dir, []string{"infiniband/verbs.h"})
	for _, c := range []struct {
		fn          string
		conv        gen.Convention
		unsupported string // the rule's Unsupported; NegativeCode when ""
		want        string // "" for no error
	}{
		{"ibv_inline_count", gen.CountOrError, "", ""},
		{"ibv_inline_count", gen.ErrnoResult, "", ""},
		{"ibv_ext_count", gen.ErrnoResult, "", ""},   // a missing extern returns ENOSYS, an errno
		{"ibv_ext_count", gen.MinusOneErrno, "", ""}, // errno beside the code: a missing one's ENOSYS
		{"ibv_ext_count", gen.CountOrError, "", "needs a static inline"},
		{"ibv_calls_ext", gen.CountOrError, "", "ibv_ext_count's absence (-1) would read as code -1"},
		{"ibv_make", gen.NullErrno, "", `convention "NULL and errno" cannot have NegativeCode`},
		{"ibv_ext_count", gen.CountOrError, "no index here", ""},
		{"ibv_ext_count", gen.MinusOneErrno, "no index here", `convention "-1 and errno" cannot have Unsupported`},
	} {
		rule := gen.ConventionRule{Name: "flagged", Convention: c.conv, Funcs: []string{c.fn}}
		if c.unsupported != "" {
			rule.Unsupported = c.unsupported
		} else {
			rule.NegativeCode = true
		}
		err := gen.AssignConventions(ir, []gen.ConventionRule{rule, {Name: "rest", Convention: gen.CannotFail, Funcs: []string{"ibv_*"}}})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s, %s: %v", c.fn, c.conv, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.fn)):
			t.Errorf("%s, %s: error %v, want one naming it and saying %q", c.fn, c.conv, err, c.want)
		}
	}
}
