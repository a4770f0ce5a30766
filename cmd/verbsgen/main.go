// Command verbsgen generates Go bindings for rdma-core's libibverbs and
// librdmacm from their headers: struct layouts that match C byte for byte,
// typed constants for every enum and integer macro, cgo stubs for every
// function, and a layout test package that checks them against gcc.
//
//	verbsgen -headers headers/rdma-core-44.0 -out generated -layout tests/layout
//	verbsgen -headers /usr/include -report
//	verbsgen verify -headers /usr/include
//	verbsgen verify -headers /usr/include -targets linux/amd64,linux/arm64
//	verbsgen since -o gen/since.tsv headers/rdma-core-33.2 headers/rdma-core-44.0
//
// verbsgen since writes the table -since-table reads: each extern function
// of the given pinned header trees (named .../rdma-core-VERSION) and the
// oldest of them that declares it. It is made once from the pinned trees
// and committed, so that generating needs no tree but -headers; goverbs'
// own, gen/since.tsv, is built into verbsgen (-since-pinned).
//
// On any error it prints one line naming the file and line, exits with
// status 1, and leaves the files of the output directories as they were:
// nothing is written before every stage has succeeded, and a failure while
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
	report := fs.Bool("report", false, "print what would be generated and what is skipped, per header; write nothing")
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
		if err != nil {
			return err
		}
		gen.Report(stdout, res.IR)
		return nil
	}
	res, err := gen.Run(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "verbsgen: rdma-core %s: %d files, %d changed\n", res.IR.Version, len(res.Files), len(res.Changed))
	return nil
}

// errMismatch makes verify exit non-zero after printing the differences.
var errMismatch = errors.New("the generated packages do not match these headers")

// verify compares the committed (or given) generated packages with the
// headers on this machine and prints every difference.
func verify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verbsgen verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	headers := fs.String("headers", "/usr/include", "include `directory` to verify against")
	dir := fs.String("dir", "", "`directory` of the generated packages (default: where -import is, found with go list)")
	importRoot := fs.String("import", "github.com/goverbs/goverbs/generated", "import `path` of -dir")
	targets := fs.String("targets", "", "comma-separated `GOOS/GOARCH` list (linux/amd64, linux/arm64) whose layouts to verify, each with the headers laid out by its Debian gcc (x86_64-linux-gnu-gcc, aarch64-linux-gnu-gcc) and the packages' files for it (default: the host's, with the host's C compiler)")
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
	differ := false
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
		for _, m := range mismatches {
			fmt.Fprintln(stdout, prefix+m.String())
		}
		constants := len(res.IR.Macros)
		for _, en := range res.IR.Enums {
			constants += len(en.Enumerators)
		}
		fmt.Fprintf(stdout, "verify: %s%d structs and unions, %d enums and %d constants of %s checked against %s (rdma-core %s): %d differences\n",
			prefix, len(res.IR.Records), len(res.IR.Enums), constants, *dir, *headers, orUnknown(res.IR.Version), len(mismatches))
		differ = differ || len(mismatches) > 0
	}
	if differ {
		return errMismatch
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
