package gen

import (
	"bufio"
	"bytes"
	_ "embed" // pinnedSince
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// pinnedSince is since.tsv: the table PinnedSince makes from every release
// goverbs pins (headers/manifest.tsv), written by make since and checked
// by make check-since.
//
//go:embed since.tsv
var pinnedSince []byte

// Pinned returns the table of the rdma-core releases goverbs pins
// (gen/since.tsv, built into the package): each extern function of
// libibverbs and librdmacm that one of them declares, and the oldest that
// does. It is what Config.Since takes to date functions without the
// pinned trees at hand; each call returns a new map.
func Pinned() map[string]string {
	since, err := parseSince("gen/since.tsv", bytes.NewReader(pinnedSince))
	if err != nil {
		panic(err) // since.tsv is committed, and TestPinned reads it
	}
	return since
}

// Release is one pinned rdma-core release's header tree, for PinnedSince.
type Release struct {
	Version string // a dotted number such as 44.0
	Headers string // its include directory
}

// PinnedSince models each release's headers (whichever of roots it has:
// an older release may lack a root header) and maps every extern function
// that any of them declares to the oldest of those releases that declares
// it. It is the table Config.Since takes, made once from the pinned trees
// and committed (WriteSince), so that generating needs no tree but the
// headers it generates from.
func PinnedSince(releases []Release, roots []string) (map[string]string, error) {
	if len(releases) == 0 {
		return nil, fmt.Errorf("no releases to date functions with")
	}
	var irs []*IR
	for _, r := range releases {
		if !numericVersion.MatchString(r.Version) {
			return nil, fmt.Errorf("release %s: version %q is not a dotted number such as 65.0", r.Headers, r.Version)
		}
		ir, err := olderRelease(r.Headers, roots)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", r.Headers, err)
		}
		ir.Version = r.Version
		irs = append(irs, ir)
	}
	return sinceTable(irs), nil
}

// WriteSince writes a table PinnedSince made, as ReadSince reads it: a
// comment naming the releases it was made from (versions, in order) and how
// it was made (command), then one "function<TAB>release" line per function,
// sorted by name. The same table always gives the same bytes.
func WriteSince(w io.Writer, since map[string]string, versions []string, command string) error {
	names := make([]string, 0, len(since))
	for n := range since {
		names = append(names, n)
	}
	sort.Strings(names)
	vs := append([]string(nil), versions...)
	sort.SliceStable(vs, func(i, j int) bool { return versionLess(vs[i], vs[j]) })
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# The oldest of the rdma-core releases %s whose headers declare each extern\n", strings.Join(vs, ", "))
	fmt.Fprintf(b, "# function: function<TAB>release, sorted by function. A function missing\n")
	fmt.Fprintf(b, "# here is declared by none of them. Made by (do not edit):\n")
	fmt.Fprintf(b, "#   %s\n", command)
	for _, n := range names {
		fmt.Fprintf(b, "%s\t%s\n", n, since[n])
	}
	return b.Flush()
}

var cIdentPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadSince reads a table WriteSince wrote (lines starting with # are
// comments). Errors name the file and line.
func ReadSince(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSince(path, f)
}

// parseSince is ReadSince of r, read from the file name.
func parseSince(path string, r io.Reader) (map[string]string, error) {
	since := map[string]string{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, version, ok := strings.Cut(text, "\t")
		switch {
		case !ok || strings.Contains(version, "\t"):
			return nil, fmt.Errorf("%s:%d: want function<TAB>release, got %q", path, line, text)
		case !cIdentPattern.MatchString(name):
			return nil, fmt.Errorf("%s:%d: %q is not a C function name", path, line, name)
		case !numericVersion.MatchString(version):
			return nil, fmt.Errorf("%s:%d: %s: release %q is not a dotted number such as 65.0", path, line, name, version)
		case since[name] != "":
			return nil, fmt.Errorf("%s:%d: %s is listed twice", path, line, name)
		}
		since[name] = version
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(since) == 0 {
		return nil, fmt.Errorf("%s: no function<TAB>release line", path)
	}
	return since, nil
}
