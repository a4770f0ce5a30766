package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The defaults are ibv_rc_pingpong's, so that the two meet with the same
// flags or none.
func TestDefaultsAreCTools(t *testing.T) {
	cfg, err := parseFlags(nil, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	want := config{port: 18515, ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 1000, gidIndex: -1}
	if cfg != want {
		t.Errorf("defaults %+v, want %+v", cfg, want)
	}
	cfg, err = parseFlags(strings.Fields("-p 1 -d rxe0 -i 2 -s 8 -m 4096 -r 3 -n 4 -l 5 -g 6 -e -c 192.0.2.1"), new(bytes.Buffer))
	want = config{host: "192.0.2.1", port: 1, device: "rxe0", ibPort: 2, size: 8, mtu: 4096, rxDepth: 3, iters: 4, sl: 5, gidIndex: 6, events: true, check: true}
	if err != nil || cfg != want {
		t.Errorf("parsed %+v, %v; want %+v", cfg, err, want)
	}
}

// Bad values fail before any device is touched, naming the flag.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"-p 65536", "-p 65536: not a TCP port"},
		{"-i 0", "-i 0: device ports"},
		{"-m 1000", "-m 1000: not one of"},
		{"-s 0", "-s 0: the size"},
		{"-r 0", "-r 0: the receive depth"},
		{"-n 0", "-n 0: at least one"},
		{"-l 16", "-l 16: service levels"},
		{"-g -2", "-g -2: GID indexes"},
		{"a b", "one HOST at most"},
	} {
		var stderr bytes.Buffer
		if code := run(strings.Fields(c.args), new(bytes.Buffer), &stderr); code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("run(%s) = %d, stderr:\n%s\nwant 1 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// -c marks what the C tool marks: a zero at the start of every page, and
// only there, so a C server finds a Go client's marks and the other way
// round.
func TestPageMarks(t *testing.T) {
	buf := bytes.Repeat([]byte{0x7b}, 2*pageSize+1)
	if got := unmarkedPages(buf); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("unmarked pages of the filler: %v, want [0 1 2]", got)
	}
	markPages(buf)
	if got := unmarkedPages(buf); got != nil {
		t.Errorf("unmarked pages after markPages: %v", got)
	}
	want := bytes.Repeat([]byte{0x7b}, len(buf))
	want[0], want[pageSize], want[2*pageSize] = 0, 0, 0
	if !bytes.Equal(buf, want) {
		t.Error("markPages changed more than the first byte of each page")
	}
}

// The example shows the generated packages standing on their own: it may
// import the standard library, cmem and generated/verbs, and nothing else
// (no unsafe, nothing of hand/). Its tests are held to the same.
func TestImportsOnlyGeneratedPackages(t *testing.T) {
	allowed := []string{"github.com/goverbs/goverbs/cmem", "github.com/goverbs/goverbs/generated/verbs"}
	files, _ := filepath.Glob("*.go")
	if len(files) < 4 {
		t.Fatalf("found %d Go files (%q): not the example's directory?", len(files), files)
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(path, "/")[0], ".")
			switch {
			case path == "unsafe" || path == "C":
				t.Errorf("%s imports %q: the example must not need it", f, path)
			case !std && !slices.Contains(allowed, path):
				t.Errorf("%s imports %s: only the standard library and %q are allowed", f, path, allowed)
			}
		}
	}
}
