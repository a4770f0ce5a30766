package gen_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/gen"
)

// TestSymbolPrefix: the prefix is a C identifier, the same on every run, and
// differs between two import paths of one package name (goverbs' verbs and
// a user's), which is what lets both link into one program.
func TestSymbolPrefix(t *testing.T) {
	own := gen.SymbolPrefix("verbs", "github.com/goverbs/goverbs/generated/verbs")
	user := gen.SymbolPrefix("verbs", "example.com/user/gen/verbs")
	assert.Equal(t, "goverbs_verbs_cf17a4c0_", own, "goverbs' own prefix changed: every committed package would")
	assert.Equal(t, own, gen.SymbolPrefix("verbs", "github.com/goverbs/goverbs/generated/verbs"))
	assert.NotEqual(t, own, user)
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	assert.Regexp(t, ident, user)
	assert.Regexp(t, ident, gen.SymbolPrefix("my-verbs", "example.com/my-verbs"), "a name that is no C identifier")
}

// TestSymbolIsolation: in goverbs' own generated files every trampoline and
// loader entry point carries the package's prefix, and the cgo preamble
// renames each extern before it includes the headers.
func TestSymbolIsolation(t *testing.T) {
	res, err := gen.Build(gen.Config{
		Headers:    "../headers/vendored/include",
		ImportRoot: "github.com/goverbs/goverbs/generated",
		Packages:   gen.Packages(),
		Roots:      gen.Roots,
		Command:    "verbsgen (symbols test)",
	})
	require.NoError(t, err)
	files := map[string]string{}
	for _, f := range res.Files {
		files[f.Path] = string(f.Data)
	}
	for _, pkg := range []string{"verbs", "rdmacm"} {
		p := gen.SymbolPrefix(pkg, "github.com/goverbs/goverbs/generated/"+pkg)
		load, funcs, names := files[pkg+"/z"+pkg+"_load.c"], files[pkg+"/z"+pkg+"_funcs.go"], files[pkg+"/z"+pkg+"_names.h"]
		require.NotEmpty(t, load, pkg)
		require.NotEmpty(t, names, pkg)
		defs := regexp.MustCompile(`(?m)^GOVERBS_HIDDEN [^(]*?\b(\w+)\(`).FindAllStringSubmatch(load, -1)
		require.NotEmpty(t, defs, pkg)
		for _, d := range defs {
			assert.True(t, strings.HasPrefix(d[1], p), "%s: %s defined without the prefix %s", pkg, d[1], p)
			if c, ok := strings.CutPrefix(d[1], p); ok && strings.Contains(load, "\t\""+c+"\",\n") {
				pragma := "#pragma redefine_extname " + c + " " + d[1] + "\n"
				assert.Contains(t, names, pragma, pkg)
				i, j := strings.Index(funcs, pragma), strings.Index(funcs, "#include <")
				assert.True(t, i >= 0 && i < j, "%s: %q missing from the preamble or after its first #include", pkg, pragma)
			}
		}
	}
	// rdmacm's headers include verbs.h: its preamble renames verbs' externs too.
	assert.Contains(t, files["rdmacm/zrdmacm_funcs.go"], "#pragma redefine_extname ibv_reg_mr "+
		gen.SymbolPrefix("verbs", "github.com/goverbs/goverbs/generated/verbs")+"ibv_reg_mr\n")
}
