// Package gen is verbsgen's library: it reads rdma-core's public headers with
// modernc.org/cc/v4 and emits Go packages whose types match the C layouts
// byte for byte, whose constants carry every enum and integer macro, and
// whose cgo stubs reach every function, static inline functions and
// function-like macros included.
//
// The stages are plain functions: Load (parse and type-check), Model (the IR,
// sorted by source position), Names (Go identifiers, then the type patches
// Retypes and NoRDMA), AssignConventions (how each function fails, from a
// user's conventions file, see ParseConventions, then the Conventions
// table), Emit (jennifer) and Write (all or nothing as far as POSIX allows,
// unchanged files untouched). gen does not download headers; see headers/
// for the pinned sets.
package gen

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
)

// Config is one generator run.
type Config struct {
	Headers    string // include directory holding infiniband/ and rdma/
	Out        string // output root: one directory per package
	ImportRoot string // import path of Out
	LayoutDir  string // where the layout test package goes; empty for none
	LayoutPkg  string // its import path
	LayoutOnly bool   // no cgo stubs
	Version    string // rdma-core version; derived from Headers when empty
	Command    string // recorded at the top of each file
	Packages   []PackageSpec
	Roots      []string
	// Conventions is the table of error conventions; nil: gen.Conventions.
	Conventions []ConventionRule
	// ConventionsFile, if set, is a conventions file (see
	// ParseConventions) whose rules go before Conventions: for the
	// functions of a user's headers that the table does not list, or
	// that a user reads otherwise. Unused with LayoutOnly.
	ConventionsFile string
	// CgoInclude makes every cgo preamble search Headers first, by a path
	// relative to the package (#cgo CFLAGS: -I${SRCDIR}/...): for headers
	// kept inside the module, so that its packages build against them and
	// never against the machine's. Headers must then be inside Out's module.
	CgoInclude bool
	// Since maps each extern function of the pinned rdma-core releases to
	// the oldest of them that declares it (PinnedSince, ReadSince): a call
	// to a function the loaded library lacks names that release, or says
	// that no pinned release declares it when the function is not in
	// Since. Nil: the errors date nothing. The headers' own version plays
	// no part: only releases whose trees made the table are named.
	Since map[string]string
	// Targets, if set, are the architectures to lay the types out for,
	// each with its own C front end configuration (see Target); with more
	// than one, what differs between them goes in per-architecture files.
	// Empty: the host's, one set of files.
	Targets []Target
}

// Result is what a run produced.
type Result struct {
	IR      *IR
	Files   []File
	Changed []string
}

var versionInPath = regexp.MustCompile(`rdma-core-([0-9][0-9.]*[0-9])`)

// VersionOf guesses the rdma-core version from an include directory named
// like headers/rdma-core-44.0, or else from a VERSION file beside it (as
// headers/vendored/VERSION is beside headers/vendored/include).
func VersionOf(headers string) string {
	if m := versionInPath.FindStringSubmatch(filepath.ToSlash(headers)); m != nil {
		return m[1]
	}
	if b, err := os.ReadFile(filepath.Join(headers, "..", "VERSION")); err == nil {
		if v := strings.TrimSpace(string(b)); versionInPath.MatchString("rdma-core-" + v) {
			return v
		}
	}
	return ""
}

var (
	// safeVersion is what a version may hold: it is pasted into comments,
	// Go string literals and C string literals.
	safeVersion = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+~_-]*$`)
	// numericVersion is a version that versionLess can order.
	numericVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
)

// checkVersions fails, naming the version, if version (the headers') could
// not be pasted into the files, or if a release of the Since table cannot
// be ordered (the oldest of them is the one every library has).
func checkVersions(cfg Config, version string) error {
	if version != "" && !safeVersion.MatchString(version) {
		return fmt.Errorf("version %q: not an rdma-core version (letters, digits and .+~_- only)", version)
	}
	names := make([]string, 0, len(cfg.Since))
	for n := range cfg.Since {
		names = append(names, n)
	}
	sort.Strings(names) // the same error each run
	for _, n := range names {
		if v := cfg.Since[n]; !numericVersion.MatchString(v) {
			return fmt.Errorf("the release of %s in the Since table, %q, is not a dotted number such as 65.0", n, v)
		}
	}
	return nil
}

// Build runs every stage but Write. When the only thing wrong is
// functions that no convention rule lists, its error is a
// *MissingConventionsError, whose IR Report can still describe.
func Build(cfg Config) (*Result, error) {
	if cfg.Packages == nil {
		cfg.Packages = Packages()
	}
	if cfg.Roots == nil {
		cfg.Roots = Roots
	}
	if cfg.Conventions == nil {
		cfg.Conventions = Conventions
	}
	if cfg.ConventionsFile != "" && !cfg.LayoutOnly {
		user, err := ReadConventions(cfg.ConventionsFile)
		if err != nil {
			return nil, err
		}
		// The user's rules first: the first rule that lists a function
		// decides.
		cfg.Conventions = append(user, cfg.Conventions...)
	}
	version := cfg.Version
	if version == "" {
		version = VersionOf(cfg.Headers)
	}
	if err := checkVersions(cfg, version); err != nil {
		return nil, err
	}
	targets := cfg.Targets
	if len(targets) == 0 {
		targets = []Target{{}} // the host
	}
	var irs []*IR
	for _, t := range targets {
		ir, err := modelOf(t, cfg.Headers, cfg.Roots)
		if err != nil {
			return nil, err
		}
		ir.Version = version
		if err := Names(ir, cfg.Packages); err != nil {
			return nil, err
		}
		if !cfg.LayoutOnly {
			if err := AssignConventions(ir, cfg.Conventions); err != nil {
				return nil, err
			}
		}
		irs = append(irs, ir)
	}
	ir := irs[0]
	var err error
	opt := EmitOptions{
		Command: cfg.Command, ImportRoot: cfg.ImportRoot, LayoutOnly: cfg.LayoutOnly, LayoutPkg: cfg.LayoutPkg,
	}
	if len(cfg.Targets) == 0 {
		opt.Target = Targets[runtime.GOOS+"/"+runtime.GOARCH] // the host's layouts; zero if verbsgen does not know it
	}
	if cfg.CgoInclude {
		if opt.IncludeDir, err = relSlash(cfg.Out, cfg.Headers); err != nil {
			return nil, err
		}
		if cfg.LayoutDir != "" {
			if opt.LayoutIncludeDir, err = relSlash(cfg.LayoutDir, cfg.Headers); err != nil {
				return nil, err
			}
		}
	}
	if cfg.LayoutPkg != "" && opt.LayoutIncludeDir == "" {
		opt.LayoutHeaders = filepath.ToSlash(cfg.Headers)
		if !filepath.IsAbs(cfg.Headers) && cfg.LayoutDir != "" {
			if opt.LayoutHeaders, err = relSlash(cfg.LayoutDir, cfg.Headers); err != nil {
				return nil, err
			}
		}
	}
	if !cfg.LayoutOnly {
		opt.Since = cfg.Since
	}
	var files []File
	if len(cfg.Targets) > 0 {
		files, err = EmitTargets(irs, cfg.Targets, cfg.Packages, opt)
	} else {
		files, err = Emit(ir, cfg.Packages, opt)
	}
	if err != nil {
		return nil, err
	}
	return &Result{IR: ir, Files: files}, nil
}

// modelOf loads and models one header set for target t (the host's when t
// is zero).
func modelOf(t Target, headers string, roots []string) (*IR, error) {
	var l *Loaded
	var err error
	if t.GOARCH == "" {
		l, err = Load(headers, roots)
	} else {
		l, err = LoadTarget(t, headers, roots)
	}
	if err != nil {
		return nil, err
	}
	return Model(l)
}

// olderRelease models a pinned release's header set for the Since table
// (PinnedSince sets its version).
func olderRelease(headers string, roots []string) (*IR, error) {
	var have []string // an older release may lack a root header
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(headers, r)); err == nil {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("none of %s is there", strings.Join(roots, ", "))
	}
	return modelOf(Target{}, headers, have)
}

// relSlash is target relative to dir, slash-separated.
func relSlash(dir, target string) (string, error) {
	a, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	b, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(a, b)
	if err != nil {
		return "", fmt.Errorf("headers %s: no path from %s: %w", target, dir, err)
	}
	return filepath.ToSlash(r), nil
}

// Run builds and writes. Nothing is written unless every stage succeeded.
func Run(cfg Config) (*Result, error) {
	res, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	layoutDir := cfg.LayoutDir
	if cfg.LayoutPkg == "" {
		layoutDir = ""
	}
	res.Changed, err = Write(cfg.Out, layoutDir, res.Files)
	return res, err
}

// Report writes, per header, what was generated and everything skipped with
// the reason, then the totals.
func Report(w io.Writer, ir *IR) {
	type counts struct{ records, enums, consts, macros, aliases, funcs int }
	per := map[string]*counts{}
	get := func(f string) *counts {
		if per[f] == nil {
			per[f] = &counts{}
		}
		return per[f]
	}
	var total counts
	for _, r := range ir.Records {
		if r.System {
			continue
		}
		get(r.Pos.File).records++
		total.records++
	}
	for _, e := range ir.Enums {
		c := get(e.Pos.File)
		c.enums++
		c.consts += len(e.Enumerators)
		total.enums++
		total.consts += len(e.Enumerators)
	}
	for _, m := range ir.Macros {
		get(m.Pos.File).macros++
		total.macros++
	}
	for _, a := range ir.Aliases {
		get(a.Pos.File).aliases++
		total.aliases++
	}
	for _, f := range ir.Funcs {
		get(f.Pos.File).funcs++
		total.funcs++
	}
	skipped := map[string][]Skip{}
	for _, s := range ir.Skipped {
		skipped[s.Pos.File] = append(skipped[s.Pos.File], s)
		get(s.Pos.File)
	}
	files := make([]string, 0, len(per))
	for f := range per {
		files = append(files, f)
	}
	sort.Strings(files)
	v := ir.Version
	if v == "" {
		v = "unknown"
	}
	fmt.Fprintf(w, "verbsgen report, rdma-core %s\n", v)
	line := func(c *counts) string {
		return fmt.Sprintf("%d structs/unions, %d enums (%d constants), %d integer macros, %d type aliases, %d functions",
			c.records, c.enums, c.consts, c.macros, c.aliases, c.funcs)
	}
	for _, f := range files {
		fmt.Fprintf(w, "%s: %s; %d skipped\n", f, line(per[f]), len(skipped[f]))
		for _, s := range skipped[f] {
			fmt.Fprintf(w, "  skipped %s %s (%s): %s\n", s.Kind, s.Name, s.Pos, s.Reason)
		}
	}
	kinds := map[FuncKind]int{}
	for _, f := range ir.Funcs {
		kinds[f.Kind]++
	}
	var sys []string
	for _, r := range ir.Records {
		if r.System {
			sys = append(sys, r.Describe())
		}
	}
	fmt.Fprintf(w, "total: %s (%d extern, %d static inline, %d function-like macros); %d opaque C library types (%s)\n",
		line(&total), kinds[FuncExtern], kinds[FuncInline], kinds[FuncMacro], len(sys), strings.Join(sys, ", "))
	fmt.Fprintf(w, "skipped: %d\n", len(ir.Skipped))
	conv := map[Convention]int{}
	fmt.Fprintln(w, "error conventions:")
	for _, f := range ir.Funcs {
		conv[f.Convention]++
		code := ""
		if f.NegativeCode {
			code = " (negative: a code of its own)"
		}
		if f.Unsupported != "" {
			code = " (-1: " + f.Unsupported + ")"
		}
		if nr := f.NoRDMA; nr != nil {
			code += fmt.Sprintf(" (%s: no RDMA: %s)", errnoNames[nr.Errno], nr.Says)
		}
		fmt.Fprintf(w, "  %s (%s): %s%s, rule %q\n", f.Name, f.Pos, f.Convention, code, f.ConventionRule)
	}
	var totals []string
	for c := CannotFail; c <= GetaddrinfoCode; c++ {
		totals = append(totals, fmt.Sprintf("%d %s", conv[c], c))
	}
	fmt.Fprintf(w, "conventions: %s; without one: %d\n", strings.Join(totals, ", "), len(ir.NoConvention))
	for _, p := range ir.StalePatches {
		fmt.Fprintf(w, "patch unused with these headers: %s\n", p)
	}
	// Last, where a reader of a long report looks first: every function
	// that generation would fail on, and the line that would settle it.
	if missing := ir.NoConvention; len(missing) > 0 {
		fmt.Fprintf(w, "functions without an error convention: %d (give each one a line in a conventions file, verbsgen -conventions FILE)\n", len(missing))
		for _, f := range missing {
			fmt.Fprintf(w, "  %s (%s): returns %s; a line %s\n", f.Name, f.Pos, cDecl(f.Result, ""), conventionHint(f))
		}
	}
}
