package isolate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// siteHeaders makes a site include directory: a copy of the vendored
// headers whose struct ibv_device_attr_ex gained a member at its end, as an
// OFED install's might, so that code compiled against it fails the
// committed packages' static assertions.
func siteHeaders(t *testing.T, root string) string {
	site := filepath.Join(t.TempDir(), "include")
	copyTree(t, filepath.Join(root, "headers/vendored/include"), site)
	file := filepath.Join(site, "infiniband/verbs.h")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	i := strings.Index(string(src), "struct ibv_device_attr_ex {")
	require.GreaterOrEqual(t, i, 0)
	end := strings.Index(string(src[i:]), "\n};") + i
	grown := string(src[:end]) + "\n\tuint64_t\t\tsite_vendor_field;" + string(src[end:])
	require.NoError(t, os.WriteFile(file, []byte(grown), 0o644))
	return site
}

// TestSiteHeaders builds goverbs' cgo packages with a site's include
// directory in every variable a site sets: each must still compile against
// its vendored headers. A control package that includes
// <infiniband/verbs.h> the ordinary way first shows that the site's headers
// do take over for it, so the test cannot pass because the variable was
// not in effect.
func TestSiteHeaders(t *testing.T) {
	root, err := filepath.Abs(repo)
	require.NoError(t, err)
	site := siteHeaders(t, root)

	control := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(control, "go.mod"), []byte("module example.com/control\n\ngo 1.25.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(control, "control.go"), []byte(`package control

/*
#include <infiniband/verbs.h>
_Static_assert(sizeof(struct ibv_device_attr_ex) == 400, "site headers took over");
*/
import "C"
`), 0o644))

	// Each variable alone makes the control package see the site's headers.
	vars := []struct{ name, value string }{
		{"CGO_CFLAGS", "-I" + site},
		{"CGO_CPPFLAGS", "-I" + site},
		{"C_INCLUDE_PATH", site},
		{"CPATH", site},
	}
	// The go command keys its cache on CGO_CFLAGS but not on CPATH or
	// C_INCLUDE_PATH: a define of its own in CGO_CFLAGS, new at each run,
	// makes each build compile the C code again, under this environment,
	// however warm the cache.
	fresh := func(i int) string { return fmt.Sprintf("-DGOVERBS_SITE_TEST=%d%d", time.Now().UnixNano(), i) }
	all := []string{"CGO_CFLAGS=" + fresh(len(vars))}
	for i, v := range vars {
		env := []string{v.name + "=" + v.value, "CGO_CFLAGS=" + fresh(i)}
		if v.name == "CGO_CFLAGS" {
			env = env[1:]
			env[0] += " " + v.value
			all[0] += " " + v.value
		} else {
			all = append(all, v.name+"="+v.value)
		}
		out, err := command(control, env, "go", "build", ".")
		require.Error(t, err, "%s: the control package built with the site's headers in the environment: %s", v.name, out)
		require.Contains(t, out, "site headers took over", v.name)
	}

	// With all four at once, goverbs' packages still build: none of the
	// variables reaches the headers they include.
	pkgs := []string{"./generated/verbs", "./generated/rdmacm", "./hand", "./tests/layout"}
	out := run(t, root, all, "go", append([]string{"build", "-x"}, pkgs...)...)
	for _, f := range []string{"zverbs_funcs.go", "zrdmacm_funcs.go", "zlayout_c.go", "hand.c"} {
		require.Contains(t, out, f, "the build did not compile %s again: the cache answered", f)
	}
	t.Logf("%s: goverbs' packages built against their vendored headers", strings.Join(all, " "))
}
