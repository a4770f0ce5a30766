package gen_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/gen"
)

// TestConventionKeywords: every convention reads back from its keyword,
// the spelling a conventions file uses, and nothing else reads as one.
func TestConventionKeywords(t *testing.T) {
	want := map[gen.Convention]string{
		gen.CannotFail: "cannot-fail", gen.NullErrno: "null-errno", gen.ErrnoResult: "errno-result",
		gen.MinusOneErrno: "minus-one-errno", gen.CountOrError: "count-or-error", gen.GetaddrinfoCode: "getaddrinfo",
	}
	for c, kw := range want {
		assert.Equal(t, kw, c.Keyword(), "%s", c)
		got, err := gen.ParseConvention(kw)
		require.NoError(t, err)
		assert.Equal(t, c, got, kw)
	}
	assert.Equal(t, "", gen.Unassigned.Keyword())
	for _, bad := range []string{"", "unassigned", "errno returned", "Errno-Result", "null_errno"} {
		_, err := gen.ParseConvention(bad)
		assert.Error(t, err, "%q read as a convention", bad)
	}
}

// TestParseConventions: comments, blank lines and white space are
// skipped; each rule keeps its line for its errors, and is named by the
// file's base name and its NAME, which the stubs' doc comments cite.
func TestParseConventions(t *testing.T) {
	src := "# vendor additions\n" +
		"\n" +
		"ibv_my_vendor_op errno-result   # an errno returned\n" +
		"\tibv_my_query_*  minus-one-errno\n" +
		"ibv_my_poll count-or-error negative-code\n" +
		"   \n" +
		"ibv_my_alloc null-errno\n"
	rules, err := gen.ParseConventions("conf/my.conventions", strings.NewReader(src))
	require.NoError(t, err)
	assert.Equal(t, []gen.ConventionRule{
		{Name: "my.conventions: ibv_my_vendor_op", Convention: gen.ErrnoResult, Funcs: []string{"ibv_my_vendor_op"},
			Source: "conf/my.conventions:3"},
		{Name: "my.conventions: ibv_my_query_*", Convention: gen.MinusOneErrno, Funcs: []string{"ibv_my_query_*"},
			Source: "conf/my.conventions:4"},
		{Name: "my.conventions: ibv_my_poll", Convention: gen.CountOrError, Funcs: []string{"ibv_my_poll"},
			NegativeCode: true, Source: "conf/my.conventions:5"},
		{Name: "my.conventions: ibv_my_alloc", Convention: gen.NullErrno, Funcs: []string{"ibv_my_alloc"},
			Source: "conf/my.conventions:7"},
	}, rules)

	rules, err = gen.ParseConventions("empty", strings.NewReader("# nothing yet\n\n"))
	require.NoError(t, err)
	assert.Empty(t, rules)
}

// TestParseConventionsErrors: each mistake is one line naming FILE:LINE
// and what is wrong.
func TestParseConventionsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown convention", "# c\nibv_x errno-returned\n",
			`my.conv:2: ibv_x: unknown convention "errno-returned" (want one of cannot-fail, null-errno, errno-result, minus-one-errno, count-or-error, getaddrinfo)`},
		{"name alone", "\n\nibv_x\n", "my.conv:3: want NAME CONVENTION [negative-code], got 1 words"},
		{"too many words", "ibv_x errno-result negative-code please\n", "my.conv:1: want NAME CONVENTION [negative-code], got 4 words"},
		{"not a C name", "ibv-x errno-result\n", `my.conv:1: "ibv-x" is neither a C function name nor a prefix of one ending in *`},
		{"star inside", "ibv_*_x errno-result\n", `my.conv:1: "ibv_*_x" is neither a C function name nor a prefix of one ending in *`},
		{"empty prefix", "* cannot-fail\n", `my.conv:1: "*" is neither a C function name nor a prefix of one ending in *`},
		{"third word", "ibv_x errno-result negative\n", `my.conv:1: ibv_x: "negative" after the convention: the only word allowed there is negative-code`},
		{"negative-code that cannot be", "ibv_x null-errno negative-code\n",
			"my.conv:1: ibv_x: null-errno cannot have negative-code (only errno-result, minus-one-errno and count-or-error can)"},
		{"duplicate", "ibv_x errno-result\nibv_y cannot-fail\n# again\nibv_x minus-one-errno\n",
			"my.conv:4: ibv_x is already given a convention at line 1"},
		{"duplicate prefix", "ibv_x* errno-result\nibv_x* errno-result\n", "my.conv:2: ibv_x* is already given a convention at line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gen.ParseConventions("my.conv", strings.NewReader(tc.src))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
	_, err := gen.ReadConventions(filepath.Join(t.TempDir(), "absent.conv"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "absent.conv: no such file or directory")
}

// vendorHeader is a header set with functions that gen.Conventions does
// not list, beside one it does (ibv_destroy_thing, by its prefix).
var vendorHeader = map[string]string{
	"infiniband/verbs.h": "#include <stdint.h>\n" + // line 1
		"struct ibv_context;\n" +
		"int ibv_destroy_thing(struct ibv_context *ctx);\n" + // line 3
		"int ibv_my_vendor_op(struct ibv_context *ctx, uint32_t flags);\n" + // line 4
		"void *ibv_my_vendor_alloc(struct ibv_context *ctx);\n" + // line 5
		"uint32_t ibv_my_vendor_mask(struct ibv_context *ctx);\n", // line 6
	"rdma/rdma_cma.h":   "",
	"rdma/rdma_verbs.h": "",
}

// buildWith builds vendorHeader with a conventions file holding conv (none
// when conv is "-").
func buildWith(t *testing.T, conv string) (*gen.Result, string, error) {
	t.Helper()
	headers := includeDir(t, vendorHeader)
	cfg := gen.Config{Headers: headers, ImportRoot: "example.com/generated", Version: "1.0", Command: "verbsgen (gen test)"}
	if conv != "-" {
		cfg.ConventionsFile = filepath.Join(t.TempDir(), "vendor.conv")
		require.NoError(t, os.WriteFile(cfg.ConventionsFile, []byte(conv), 0o644))
	}
	res, err := gen.Build(cfg)
	return res, cfg.ConventionsFile, err
}

// TestMissingConventions: Build fails on functions no rule lists with an
// error that has all of them and the model, every other function
// assigned; its message names the first, its result type and the line a
// conventions file needs; Report lists them all, last.
func TestMissingConventions(t *testing.T) {
	_, _, err := buildWith(t, "-")
	var missing *gen.MissingConventionsError
	require.ErrorAs(t, err, &missing)
	var names []string
	for _, f := range missing.Funcs {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"ibv_my_vendor_op", "ibv_my_vendor_alloc", "ibv_my_vendor_mask"}, names)
	assert.Equal(t, missing.Funcs, missing.IR.NoConvention)
	assert.Equal(t, `infiniband/verbs.h:4: ibv_my_vendor_op returns int and has no error convention: `+
		`give it one in a conventions file (verbsgen -conventions FILE), a line "ibv_my_vendor_op CONVENTION", `+
		`CONVENTION one of errno-result, minus-one-errno, count-or-error, getaddrinfo, cannot-fail `+
		`(those a result of type int fits: its documentation says which) (in goverbs itself: a rule of gen.Conventions); `+
		`2 more functions have none (verbsgen -report lists them all)`, err.Error())
	for _, f := range missing.IR.Funcs {
		if f.Name == "ibv_destroy_thing" {
			assert.Equal(t, gen.ErrnoResult, f.Convention, "the built-in table's function is assigned all the same")
		}
	}

	var rep bytes.Buffer
	gen.Report(&rep, missing.IR)
	out := rep.String()
	i := strings.Index(out, "functions without an error convention: 3 (give each one a line in a conventions file, verbsgen -conventions FILE)\n")
	require.GreaterOrEqual(t, i, 0, "the report does not list the functions without a convention:\n%s", out)
	assert.Equal(t, "functions without an error convention: 3 (give each one a line in a conventions file, verbsgen -conventions FILE)\n"+
		`  ibv_my_vendor_op (infiniband/verbs.h:4): returns int; a line "ibv_my_vendor_op CONVENTION", CONVENTION one of errno-result, minus-one-errno, count-or-error, getaddrinfo, cannot-fail (those a result of type int fits: its documentation says which)`+"\n"+
		`  ibv_my_vendor_alloc (infiniband/verbs.h:5): returns void *; a line "ibv_my_vendor_alloc CONVENTION", CONVENTION one of null-errno, cannot-fail (those a result of type void * fits: its documentation says which)`+"\n"+
		`  ibv_my_vendor_mask (infiniband/verbs.h:6): returns uint32_t; a line "ibv_my_vendor_mask cannot-fail" (the only convention a result of type uint32_t fits)`+"\n",
		out[i:], "the list is not the end of the report")
	assert.Contains(t, out, "; without one: 3\n")

	// One function left: no count.
	_, _, err = buildWith(t, "ibv_my_vendor_op errno-result\nibv_my_vendor_alloc null-errno\n")
	require.ErrorAs(t, err, &missing)
	assert.True(t, strings.HasPrefix(err.Error(), `infiniband/verbs.h:6: ibv_my_vendor_mask returns uint32_t and has no error convention: `+
		`give it one in a conventions file (verbsgen -conventions FILE), a line "ibv_my_vendor_mask cannot-fail"`), err.Error())
	assert.NotContains(t, err.Error(), "more function")
}

// TestConventionsFileRules: a conventions file's rules give the functions
// the table does not list their conventions, decide before the built-in
// rules, are cited by the stubs, and one that matches nothing is a
// warning.
func TestConventionsFileRules(t *testing.T) {
	res, file, err := buildWith(t, "# vendor\n"+
		"ibv_my_vendor_op errno-result\n"+
		"ibv_my_vendor_a* null-errno\n"+
		"ibv_my_vendor_mask cannot-fail\n"+
		"ibv_destroy_thing minus-one-errno\n"+ // the table says errno-result
		"ibv_my_vendor_gone errno-result\n")
	require.NoError(t, err)
	conv := map[string]*gen.Func{}
	for _, f := range res.IR.Funcs {
		conv[f.Name] = f
	}
	for name, want := range map[string]gen.Convention{
		"ibv_my_vendor_op": gen.ErrnoResult, "ibv_my_vendor_alloc": gen.NullErrno,
		"ibv_my_vendor_mask": gen.CannotFail, "ibv_destroy_thing": gen.MinusOneErrno,
	} {
		require.Contains(t, conv, name)
		assert.Equal(t, want, conv[name].Convention, name)
	}
	assert.Equal(t, "vendor.conv: ibv_destroy_thing", conv["ibv_destroy_thing"].ConventionRule, "the user's rule decides first")
	assert.Empty(t, res.IR.NoConvention)
	assert.Equal(t, []string{file + ":6: ibv_my_vendor_gone matches no function in these headers"}, res.IR.Warnings)
	assert.Contains(t, res.IR.StalePatches, "conventions file "+file+":6: ibv_my_vendor_gone matches no function in these headers")

	var stubs []byte
	for _, f := range res.Files {
		if f.Path == "verbs/zverbs_funcs.go" {
			stubs = f.Data
		}
	}
	require.NotNil(t, stubs, "no stubs among %v", paths(res.Files))
	// Doc comments wrap: read them as one line.
	doc := strings.ReplaceAll(string(stubs), "\n// ", " ")
	assert.Contains(t, doc, `(error convention "errno returned", rule "vendor.conv: ibv_my_vendor_op")`)
	assert.Contains(t, string(stubs), "func MyVendorOp(")
}

// TestConventionsFileFit: a conventions file's rule is held to the fit
// check of the built-in table: its error names the file's line, the
// function's header line and its result type.
func TestConventionsFileFit(t *testing.T) {
	for _, tc := range []struct {
		name, conv, want string
	}{
		{"null-errno for an int", "ibv_my_vendor_alloc null-errno\nibv_my_vendor_mask cannot-fail\n\nibv_my_vendor_op null-errno\n",
			"FILE:4: ibv_my_vendor_op null-errno does not fit ibv_my_vendor_op (infiniband/verbs.h:4), which returns int: " +
				"it fits errno-result, minus-one-errno, count-or-error, getaddrinfo, cannot-fail"},
		{"a prefix sweeping in a pointer", "ibv_my_vendor_* errno-result\n",
			"FILE:1: ibv_my_vendor_* errno-result does not fit ibv_my_vendor_alloc (infiniband/verbs.h:5), which returns void *: " +
				"it fits null-errno, cannot-fail (and 1 more functions)"}, // ibv_my_vendor_mask, an uint32_t
		{"errno-result for an unsigned result", "ibv_my_vendor_op errno-result\nibv_my_vendor_alloc null-errno\nibv_my_vendor_mask errno-result\n",
			"FILE:3: ibv_my_vendor_mask errno-result does not fit ibv_my_vendor_mask (infiniband/verbs.h:6), which returns uint32_t: " +
				"only cannot-fail fits it"},
		{"negative-code on an extern's count", "ibv_my_vendor_op count-or-error negative-code\nibv_my_vendor_alloc null-errno\nibv_my_vendor_mask cannot-fail\n",
			"FILE:1: ibv_my_vendor_op (infiniband/verbs.h:4): negative-code with count-or-error needs a static inline: " +
				"a missing extern's -1 would read as code -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, file, err := buildWith(t, tc.conv)
			require.Error(t, err)
			var missing *gen.MissingConventionsError
			assert.False(t, errors.As(err, &missing), "a rule that does not fit is no missing convention")
			assert.Equal(t, strings.ReplaceAll(tc.want, "FILE", file), err.Error())
		})
	}
}
