// Command verbsgen generates Go bindings for rdma-core's libibverbs and
// librdmacm from their headers: struct layouts that match C byte for byte,
// typed constants for every enum and integer macro, cgo stubs for every
// function, and a layout test package that checks them against gcc.
//
//	verbsgen -headers headers/rdma-core-44.0 -out generated -layout tests/layout
//	verbsgen -headers /usr/include -report
//
// On any error it prints one line naming the file and line, exits with
// status 1, and leaves the output directories exactly as they were.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/goverbs/goverbs/gen"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "verbsgen:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
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
	report := fs.Bool("report", false, "print what would be generated and what is skipped, per header; write nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if cfg.LayoutDir != "" {
		cfg.LayoutPkg = *layoutImport
		if cfg.LayoutPkg == "" {
			cfg.LayoutPkg = strings.TrimSuffix(cfg.ImportRoot, "/generated") + "/tests/layout"
		}
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
