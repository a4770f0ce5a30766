// Command verbsgen generates Go bindings for rdma-core's libibverbs and
// librdmacm from their headers: struct layouts that match C byte for byte,
// typed constants for every enum and integer macro, cgo stubs for every
// function, and a layout test package that checks them against gcc.
//
// goverbs' own packages come from the vendored headers, for two
// architectures, by this //go:generate line of generated/doc.go (make
// generate), run in generated/:
//
//	go run ../cmd/verbsgen -headers ../headers/vendored/include -cgo-include \
//		-targets linux/amd64,linux/arm64 -since-pinned -out . -layout ../tests/layout
//
// A module of a user's own (go get -tool github.com/goverbs/goverbs/cmd/verbsgen)
// with its header set in include/ and its conventions file beside it
// generates, reports on, and verifies its packages with:
//
//	go tool verbsgen -headers include -cgo-include -since-pinned -conventions verbs.conventions -import example.com/site/generated -out generated
//	go tool verbsgen -headers include -conventions verbs.conventions -report
//	go tool verbsgen verify -headers include -import example.com/site/generated
//	go tool verbsgen verify -headers /usr/include -targets linux/amd64,linux/arm64
//
// # Dating functions
//
// -since-pinned makes the error of a call to a function the loaded library
// lacks name the oldest rdma-core release goverbs pins that declares it, or
// say that none does (a vendor's function). The table comes from the pinned
// header trees and is committed (gen/since.tsv), so generating needs no tree
// but -headers; verbsgen since remakes it after make headers, and
// -since-table reads another:
//
//	verbsgen since -o gen/since.tsv headers/rdma-core-33.2 headers/rdma-core-44.0 ...
//
// # Error conventions
//
// Each stub returns what its function's error convention calls for, and
// verbsgen's table (gen.Conventions) knows those of rdma-core's functions.
// A function it does not know, a vendor's addition or a newer release's,
// stops generation with its header line, its result type and the line that
// would settle it, which the user writes in a conventions file of their own
// module, given with -conventions. Its rules decide before verbsgen's own:
//
//	# our vendor's additions to rdma-core
//	ibv_my_vendor_op    errno-result
//	ibv_my_vendor_get_* minus-one-errno
//	ibv_my_vendor_poll  count-or-error negative-code
//
// One rule a line, NAME CONVENTION [negative-code]; # starts a comment and
// blank lines are ignored. NAME is a C function name, or a prefix ending in
// * for every function that starts with it. CONVENTION is one of:
//
//	cannot-fail      a value, or void: returned as is
//	null-errno       a pointer, NULL with errno set on failure: (T, error)
//	errno-result     an int, 0 or the errno of the failure (or its negation): error
//	minus-one-errno  an int, -1 with errno set on failure: error
//	count-or-error   a count, or a negative -1 with errno or -errno on failure: (int, error)
//	getaddrinfo      0, -1 with errno, or a getaddrinfo(3) EAI_* code: error
//
// negative-code says that a negative result is a code of the function's own,
// which the error keeps (verberr.Error.Code) instead of reading it as an
// errno: for errno-result, minus-one-errno, and count-or-error of a static
// inline function that calls no extern. Every mistake is an error naming
// FILE:LINE: an unknown word, a malformed line, a name given twice, and a
// convention that does not fit a function's result type (null-errno for an
// int), which names the function's header line too. A rule that matches no
// function is a warning. -report lists, after the rest of the report, every
// function that has no convention, then exits with status 1.
//
// # Verify
//
// verify compares generated packages (by default goverbs' own, found with
// go list; -dir and -import for others) with a header set, without
// compiling: every record's size, alignment and member offsets and types,
// every enum, enumerator and macro constant, and every function's result
// and parameters (by type class, size and sign). Each difference is printed
// on a line that starts with its class:
//
//	addition: struct ibv_device_attr_ex member my_new: offset: C 400, Go missing
//	breaking: struct ibv_port_attr member lid: offset: C 36, Go 34
//	breaking: function ibv_query_port_speed parameter 2 (port_num): C uint64, Go uint32
//
// An addition is growth that leaves what the packages have intact (a new
// record, enumerator, macro or function, a member in padding, reserved
// space or past a record's old end), whichever side is the newer; anything
// else is breaking (see gen.Verify). A summary per target follows, then the
// verdict, "verify: compatible: N additions" or "verify: incompatible: N
// breaking changes, M additions". verify exits 0 when there is no
// difference, 1 on any breaking change, and on additions only 1 too unless
// -allow-growth is given, which makes pure growth exit 0.
//
// On any error it prints one line naming the file and line (after any
// warnings), exits with status 1, and leaves the files of the output
// directories as they were: nothing is written before every stage has
// succeeded, and a failure while
// writing undoes what was written (gen.Write). POSIX sets the limit: the
// files are renamed into place one at a time, so a crash during those
// renames, or a reader at that moment, can see old and new files mixed;
// and the directories' own modification times may change.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/goverbs/goverbs/gen"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed, and asking for it is no failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "verbsgen:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify" {
		return verify(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "since" {
		return since(args[1:], stderr)
	}
	fs := flag.NewFlagSet("verbsgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg gen.Config
	fs.StringVar(&cfg.Headers, "headers", "/usr/include", "include `directory` holding infiniband/ and rdma/")
	fs.StringVar(&cfg.Out, "out", "generated", "output root `directory`: one subdirectory per package")
	fs.StringVar(&cfg.ImportRoot, "import", "github.com/goverbs/goverbs/generated", "import `path` of the output root")
	fs.StringVar(&cfg.LayoutDir, "layout", "", "`directory` for the layout test package (empty: none)")
	layoutImport := fs.String("layout-import", "", "import `path` of the layout test package (default: -import's module path + /tests/layout)")
	fs.BoolVar(&cfg.LayoutOnly, "layout-only", false, "emit layouts and constants only, no cgo stubs (nothing to link)")
	fs.StringVar(&cfg.Version, "version", "", "rdma-core `version` recorded in the files (default: from the -headers path)")
	fs.BoolVar(&cfg.CgoInclude, "cgo-include", false, "cgo preambles include -headers by a path relative to each package (#cgo CFLAGS), not the machine's headers; -headers must be inside the output's module")
	sinceTable := fs.String("since-table", "", "`file` mapping each function of the pinned rdma-core releases to the oldest that declares it (made by verbsgen since): a missing function's error names that release, or says that no pinned release declares it (default: nothing is dated)")
	sincePinned := fs.Bool("since-pinned", false, "as -since-table, with the table of the releases goverbs pins that is built into verbsgen (gen/since.tsv)")
	targets := fs.String("targets", "", "comma-separated `GOOS/GOARCH` list (linux/amd64, linux/arm64) to lay the types out for, each configured from its Debian gcc (x86_64-linux-gnu-gcc, aarch64-linux-gnu-gcc); what differs goes in per-architecture files (default: the host only)")
	fs.StringVar(&cfg.ConventionsFile, "conventions", "", "conventions `file`: the error conventions of functions verbsgen's own table does not list (its rules decide first). "+
		"One rule a line, NAME CONVENTION [negative-code]: NAME a C function or a prefix ending in *, CONVENTION one of "+
		"cannot-fail, null-errno, errno-result, minus-one-errno, count-or-error, getaddrinfo; # starts a comment "+
		"(go doc github.com/goverbs/goverbs/cmd/verbsgen)")
	report := fs.Bool("report", false, "print what would be generated and what is skipped, per header, and last every function without an error convention (then exit 1); write nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	// Flags that would otherwise be ignored without a word.
	if cfg.LayoutOnly && (*sinceTable != "" || *sincePinned) {
		return errors.New("-since-table and -since-pinned date stubs, which -layout-only does not emit")
	}
	if *sinceTable != "" && *sincePinned {
		return errors.New("-since-table and -since-pinned are two tables: give one")
	}
	if cfg.LayoutOnly && cfg.ConventionsFile != "" {
		return errors.New("-conventions gives stubs their error conventions, which -layout-only does not emit")
	}
	if *layoutImport != "" && cfg.LayoutDir == "" {
		return errors.New("-layout-import needs -layout")
	}
	if cfg.LayoutDir != "" {
		cfg.LayoutPkg = *layoutImport
		if cfg.LayoutPkg == "" {
			cfg.LayoutPkg = strings.TrimSuffix(cfg.ImportRoot, "/generated") + "/tests/layout"
		}
	}
	if *sinceTable != "" {
		table, err := gen.ReadSince(*sinceTable)
		if err != nil {
			return err
		}
		cfg.Since = table
	}
	if *sincePinned {
		cfg.Since = gen.Pinned()
	}
	if *targets != "" {
		ts, err := gen.ParseTargets(*targets)
		if err != nil {
			return err
		}
		cfg.Targets = ts
	}
	cfg.Command = "verbsgen " + strings.Join(args, " ")
	if *report {
		res, err := gen.Build(cfg)
		var missing *gen.MissingConventionsError
		if errors.As(err, &missing) {
			// The report is what a user needs to write their conventions
			// file: print it all, the functions without one last.
			gen.Report(stdout, missing.IR)
			if n := len(missing.Funcs); n > 1 {
				return fmt.Errorf("%d functions have no error convention", n)
			}
			return errors.New("1 function has no error convention")
		}
		if err != nil {
			return err
		}
		gen.Report(stdout, res.IR)
		return nil
	}
	res, err := gen.Run(cfg)
	var missing *gen.MissingConventionsError
	if errors.As(err, &missing) {
		// A misspelt rule is the likeliest reason for a function to have
		// no convention.
		warn(stderr, missing.IR)
	}
	if err != nil {
		return err
	}
	warn(stderr, res.IR)
	fmt.Fprintf(stdout, "verbsgen: rdma-core %s: %d files, %d changed\n", res.IR.Version, len(res.Files), len(res.Changed))
	return nil
}

// warn prints ir's warnings, one line each.
func warn(stderr io.Writer, ir *gen.IR) {
	for _, w := range ir.Warnings {
		fmt.Fprintln(stderr, "verbsgen: warning:", w)
	}
}

// The errors that make verify exit non-zero after printing the differences.
var (
	errBreaking = errors.New("the generated packages are incompatible with these headers")
	errGrowth   = errors.New("the generated packages and these headers differ by growth only (-allow-growth accepts that)")
)

// verify compares the committed (or given) generated packages with the
// headers on this machine, prints every difference prefixed by its class
// ("addition: " or "breaking: ", see gen.Class), a summary line per target
// and a verdict line, "verify: compatible: N additions" or "verify:
// incompatible: N breaking changes, M additions". It fails on a breaking
// change, and on an addition unless -allow-growth.
func verify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verbsgen verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	headers := fs.String("headers", "/usr/include", "include `directory` to verify against")
	dir := fs.String("dir", "", "`directory` of the generated packages (default: where -import is, found with go list)")
	importRoot := fs.String("import", "github.com/goverbs/goverbs/generated", "import `path` of -dir")
	targets := fs.String("targets", "", "comma-separated `GOOS/GOARCH` list (linux/amd64, linux/arm64) whose layouts to verify, each with the headers laid out by its Debian gcc (x86_64-linux-gnu-gcc, aarch64-linux-gnu-gcc) and the packages' files for it (default: the host's, with the host's C compiler)")
	allowGrowth := fs.Bool("allow-growth", false, "exit 0 when the headers only add to what the packages have (new declarations, members in padding, reserved space or past a record's end); breaking changes still fail")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	var ts []gen.Target
	if *targets != "" {
		var err error
		if ts, err = gen.ParseTargets(*targets); err != nil {
			return err
		}
	}
	if *dir == "" {
		// The output root is found through a package under it: a user's
		// generated/ holds only the package directories, no Go file.
		pkg := *importRoot + "/" + gen.Packages()[0].Name
		out, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && len(ee.Stderr) > 0 {
				err = errors.New(strings.TrimSpace(string(ee.Stderr)))
			}
			return fmt.Errorf("finding %s (give -dir): %w", pkg, err)
		}
		*dir = filepath.Dir(strings.TrimSpace(string(out)))
	}
	if ts == nil {
		ts = []gen.Target{{}} // the host's
	}
	var breaking, additions int
	for _, t := range ts {
		cfg := gen.Config{Headers: *headers, ImportRoot: *importRoot, LayoutOnly: true}
		prefix := ""
		if t.GOARCH != "" {
			cfg.Targets, prefix = []gen.Target{t}, t.Name()+": "
		}
		res, err := gen.Build(cfg)
		if err != nil {
			return err
		}
		mismatches, err := gen.Verify(res.IR, gen.Packages(), *dir, *importRoot, t.GOARCH)
		if err != nil {
			return err
		}
		var b, a int
		for _, m := range mismatches {
			fmt.Fprintf(stdout, "%s: %s%s\n", m.Class, prefix, m)
			if m.Class == gen.Addition {
				a++
			} else {
				b++
			}
		}
		constants := len(res.IR.Macros)
		for _, en := range res.IR.Enums {
			constants += len(en.Enumerators)
		}
		fmt.Fprintf(stdout, "verify: %s%d structs and unions, %d enums, %d constants and %d functions of %s checked against %s (rdma-core %s): %d differences (%d breaking, %d additions)\n",
			prefix, len(res.IR.Records), len(res.IR.Enums), constants, len(res.IR.Funcs), *dir, *headers, orUnknown(res.IR.Version), len(mismatches), b, a)
		breaking += b
		additions += a
	}
	switch {
	case breaking > 0:
		fmt.Fprintf(stdout, "verify: incompatible: %d breaking changes, %d additions\n", breaking, additions)
		return errBreaking
	case additions > 0:
		fmt.Fprintf(stdout, "verify: compatible: %d additions\n", additions)
		if !*allowGrowth {
			return errGrowth
		}
	default:
		fmt.Fprintln(stdout, "verify: compatible: 0 additions")
	}
	return nil
}

// since writes the table of the pinned releases' functions (gen.PinnedSince)
// to -o, which it leaves as it was on any error.
func since(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("verbsgen since", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "`file` to write the table to")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of verbsgen since: verbsgen since -o FILE DIR... (each DIR an include directory named .../rdma-core-VERSION)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("since: -o is required")
	}
	if fs.NArg() == 0 {
		return errors.New("since: no release trees given (.../rdma-core-VERSION)")
	}
	var releases []gen.Release
	var versions []string
	for _, dir := range fs.Args() {
		v := gen.VersionOf(dir)
		if v == "" || filepath.Base(filepath.Clean(dir)) != "rdma-core-"+v {
			return fmt.Errorf("since: %s: no rdma-core version in the name (want .../rdma-core-VERSION)", dir)
		}
		releases = append(releases, gen.Release{Version: v, Headers: dir})
		versions = append(versions, v)
	}
	table, err := gen.PinnedSince(releases, gen.Roots)
	if err != nil {
		return err
	}
	var b strings.Builder
	if err := gen.WriteSince(&b, table, versions, "verbsgen since -o FILE "+strings.Join(fs.Args(), " ")); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

// noArgs fails if arguments follow the flags: verbsgen takes none.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

func orUnknown(v string) string {
	if v == "" {
		return "version unknown"
	}
	return v
}
