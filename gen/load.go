package gen

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"modernc.org/cc/v4"
	"modernc.org/token"
)

// hostConfig asks the host C compiler for its predefined macros and include
// paths once per process: cc.NewConfig runs the compiler each time.
var hostConfig = sync.OnceValues(func() (*cc.Config, error) {
	return cc.NewConfig(runtime.GOOS, runtime.GOARCH)
})

// Loaded is a type-checked translation unit and where its headers came from.
type Loaded struct {
	AST     *cc.AST
	Headers string // absolute include directory the target headers were read from
	Roots   []string
	// System are the C library's include directories, longest first: a
	// position in one of them is recorded relative to it
	// ("bits/pthreadtypes.h"), the same on every machine and architecture.
	System []string
	// Read are the target headers (see isTargetPath) the front end read
	// from the include directory, relative to it, sorted, each with the
	// SHA-256 of the bytes read: what the layouts were made from.
	Read []HeaderDigest
	// packPragmas are where a pack pragma occurred (_Pragma_ for the
	// operator's form): cc/v4 ignores them, so Model refuses one anywhere
	// in the headers directory.
	packPragmas []token.Position
}

// Load parses and type-checks the root headers (paths relative to the include
// directory headers, e.g. "infiniband/verbs.h") as one translation unit with
// cc/v4, configured like the host C compiler. The include directory is
// searched first; every target header (see isTarget) must resolve inside it,
// so a pinned header set never silently mixes with the system's.
//
// cc/v4 panics on some malformed input instead of returning an error: Load
// recovers and reports the panic as an error naming the header. On other
// input it would never return (see screenHeaders, and the preprocessing
// that precedes its parse): Load refuses that first, with file and line.
func Load(headers string, roots []string) (l *Loaded, err error) {
	return load(nil, headers, roots)
}

// LoadTarget is Load with the C front end configured for target t (its ABI,
// its compiler's predefined macros and C library headers) instead of the
// host's.
func LoadTarget(t Target, headers string, roots []string) (*Loaded, error) {
	return load(&t, headers, roots)
}

func load(t *Target, headers string, roots []string) (l *Loaded, err error) {
	abs, err := filepath.Abs(headers)
	if err != nil {
		return nil, fmt.Errorf("headers %s: %w", headers, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("headers directory %s: %w", headers, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("headers directory %s: not a directory", headers)
	}
	if len(roots) == 0 {
		return nil, errors.New("no root headers to read")
	}
	var src strings.Builder
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(abs, r)); err != nil {
			return nil, fmt.Errorf("%s: header not found in %s", r, headers)
		}
		fmt.Fprintf(&src, "#include <%s>\n", r)
	}

	if err := screenHeaders(abs); err != nil {
		return nil, err
	}
	var host *cc.Config
	if t == nil {
		host, err = hostConfig()
	} else {
		host, err = targetConfig(*t)
	}
	if err != nil {
		return nil, fmt.Errorf("configuring the C front end: %w", err)
	}
	cfg := *host // a copy: each Load sets its own include paths and options
	// gcc makes an enum with no negative value unsigned; cc/v4 only does so
	// when asked (85 enums differ otherwise).
	cfg.UnsignedEnums = true
	// Object-like macros get a value only when evaluated eagerly.
	cfg.EvalAllMacros = true
	var packPragmas []token.Position
	cfg.PragmaHandler = func(toks []cc.Token) error {
		if len(toks) > 0 && toks[0].SrcStr() == "pack" {
			packPragmas = append(packPragmas, toks[0].Position())
		}
		return nil
	}
	// Every file the front end opens goes through rec, which records it:
	// the target headers among them are the layouts' sources (Loaded.Read).
	rec := &recordingFS{opened: map[string]bool{}}
	cfg.FS = rec
	cfg.IncludePaths = append([]string{abs}, host.IncludePaths...)
	cfg.SysIncludePaths = append([]string{abs}, host.SysIncludePaths...)

	defer func() {
		if e := recover(); e != nil {
			l, err = nil, fmt.Errorf("%s:1: C front end crashed while reading this header set: %v", roots[0], firstLine(fmt.Sprint(e)))
		}
	}()
	sources := []cc.Source{
		// Without these two the front end panics inside glibc headers.
		{Name: "<predefined>", Value: cfg.Predefined},
		{Name: "<builtin>", Value: cc.Builtin},
		{Name: "<verbsgen>", Value: src.String()},
		// cc/v4 (v4.31.0) loops forever, allocating until the process runs
		// out of memory, when the input ends inside a pointer declarator
		// ("int *;" as the last line of a header): a complete declaration
		// after the headers lets it stop.
		{Name: endSource, Value: "typedef int __verbsgen_end_of_input;\n"},
	}
	// The preprocessor alone first: on an #include it cannot follow (a
	// file not found, a malformed name, nesting too deep) cc/v4 ends the
	// whole input there, before the sentinel above, and its parser then
	// spins as on any input ending inside a declarator ("*" before
	// "#include <missing.h>"). Alone, it reports the #include's position.
	pre := cfg
	pre.PragmaHandler = nil
	if err := cc.Preprocess(&pre, sources, io.Discard); err != nil {
		return nil, frontEndError(err, abs, roots)
	}
	ast, err := cc.Translate(&cfg, sources)
	if err != nil {
		return nil, frontEndError(err, abs, roots)
	}
	l = &Loaded{AST: ast, Headers: abs, Roots: roots, packPragmas: packPragmas}
	if l.Read, err = l.digests(rec.opened); err != nil {
		return nil, err
	}
	for _, d := range append(append([]string(nil), host.IncludePaths...), host.SysIncludePaths...) {
		if d != "" && filepath.IsAbs(d) && !slices.Contains(l.System, filepath.Clean(d)) {
			l.System = append(l.System, filepath.Clean(d))
		}
	}
	sort.SliceStable(l.System, func(i, j int) bool { return len(l.System[i]) > len(l.System[j]) })
	if err := l.checkHermetic(); err != nil {
		return nil, err
	}
	return l, nil
}

// HeaderDigest is a header file, relative to its include directory
// ("infiniband/verbs.h"), and the SHA-256 of its bytes in hex.
type HeaderDigest struct {
	Path, SHA256 string
}

// recordingFS opens files from the operating system, as cc/v4 does without
// an FS, and records each name it opened.
type recordingFS struct {
	opened map[string]bool
}

func (r *recordingFS) Open(name string) (fs.File, error) {
	f, err := os.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	r.opened[filepath.Clean(filepath.FromSlash(name))] = true
	return f, nil
}

// digests returns the target headers among the files opened that lie in
// the include directory, with their digests, sorted by path.
func (l *Loaded) digests(opened map[string]bool) ([]HeaderDigest, error) {
	var out []HeaderDigest
	for name := range opened {
		abs, err := filepath.Abs(name)
		if err != nil {
			continue
		}
		r, ok := l.rel(abs)
		if !ok || !isTargetPath(r) {
			continue
		}
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			continue // a directory opened while searching: not a source
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			return nil, fmt.Errorf("%s: reading it again for its digest: %w", r, err)
		}
		out = append(out, HeaderDigest{Path: r, SHA256: fmt.Sprintf("%x", sha256.Sum256(data))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// endSource names the sentinel source Load appends after the headers.
const endSource = "<verbsgen-end>"

// frontEndError is an error of cc/v4's, preprocessing or parsing, as Load
// returns it: its first line, with a header's position where cc/v4 gives
// none or the sentinel's, which means the headers ended inside a
// declaration or a directive.
func frontEndError(err error, dir string, roots []string) error {
	msg := firstLine(err.Error())
	if strings.HasPrefix(msg, "-:") || strings.HasPrefix(msg, endSource+":") {
		file, line := truncatedHeader(dir, roots)
		msg = fmt.Sprintf("%s:%d: unexpected end of input: the last declaration is incomplete", file, line)
	}
	return errors.New(msg)
}

// truncatedHeader finds the header of dir that ends inside a declaration,
// and the line of its last token, for an input that cc/v4 found to end
// early: the roots are looked at first, then the other target headers.
// Failing that, it names the last line of the last root.
func truncatedHeader(dir string, roots []string) (string, int) {
	files := make([]string, 0, len(roots))
	for _, r := range roots {
		files = append(files, filepath.Join(dir, r))
	}
	for _, sub := range []string{"infiniband", "rdma"} {
		others, _ := filepath.Glob(filepath.Join(dir, sub, "*.h")) // sorted
		for _, f := range others {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if line, open := lastDeclaration(stripComments(string(data))); open {
			return f, line
		}
	}
	last := files[len(roots)-1]
	data, _ := os.ReadFile(last)
	return last, max(strings.Count(strings.TrimRight(string(data), "\n"), "\n")+1, 1)
}

// lastDeclaration returns the line of the last token of C text (comments
// already removed) outside preprocessor directives, and whether the text
// ends inside a declaration there: with a brace or parenthesis open, or on
// a token other than ';' or '}'.
func lastDeclaration(src string) (line int, open bool) {
	lines := strings.Split(src, "\n")
	var code strings.Builder
	directive := false // inside a directive's continuation lines
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if directive || strings.HasPrefix(t, "#") {
			directive = strings.HasSuffix(t, "\\")
			continue
		}
		if t != "" {
			line = i + 1
		}
		code.WriteString(l + "\n")
	}
	c := strings.TrimSpace(code.String())
	if c == "" {
		return 0, false
	}
	last := c[len(c)-1]
	return line, depth(c, '(', ')') != 0 || depth(c, '{', '}') != 0 || last != ';' && last != '}'
}

// checkHermetic fails if a target header was found outside the include
// directory: the set is incomplete and the system's copy would leak in. It
// names the first such declaration by position, so the error is the same
// on every run (Scope.Nodes is a map).
func (l *Loaded) checkHermetic() error {
	type decl struct {
		file, name string
		line       int
	}
	var bad []decl
	for name, nodes := range l.AST.Scope.Nodes {
		for _, n := range nodes {
			p := n.Position()
			if _, ok := l.rel(p.Filename); ok || !isTargetPath(p.Filename) || kernelUAPI[uapiPath(p.Filename)] {
				continue
			}
			bad = append(bad, decl{p.Filename, name, p.Line})
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Slice(bad, func(i, j int) bool {
		a, b := bad[i], bad[j]
		if a.file != b.file {
			return a.file < b.file
		}
		if a.line != b.line {
			return a.line < b.line
		}
		return a.name < b.name
	})
	return fmt.Errorf("%s:%d: declares %s but lies outside %s: the header set is incomplete", bad[0].file, bad[0].line, bad[0].name, l.Headers)
}

// rel returns file relative to the include directory, and whether it is inside.
func (l *Loaded) rel(file string) (string, bool) {
	r, err := filepath.Rel(l.Headers, file)
	if err != nil || strings.HasPrefix(r, "..") {
		return file, false
	}
	return filepath.ToSlash(r), true
}

// sysRel returns file relative to the C library include directory holding
// it, and whether there is one.
func (l *Loaded) sysRel(file string) (string, bool) {
	for _, d := range l.System {
		if r, err := filepath.Rel(d, file); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r), true
		}
	}
	return file, false
}

// isTargetPath reports whether a header belongs to rdma-core's public API:
// everything under infiniband/ and rdma/.
func isTargetPath(file string) bool {
	f := filepath.ToSlash(file)
	return strings.HasPrefix(f, "infiniband/") || strings.HasPrefix(f, "rdma/") ||
		strings.Contains(f, "/infiniband/") || strings.Contains(f, "/rdma/")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// uapiPath is the include path ("rdma/ib_user_verbs.h") of a header found
// in a system include directory.
func uapiPath(file string) string {
	f := filepath.ToSlash(file)
	for _, dir := range []string{"/rdma/", "/infiniband/"} {
		if i := strings.LastIndex(f, dir); i >= 0 {
			return f[i+1:]
		}
	}
	return f
}

// screenHeaders rejects, in the target headers of dir, what cc/v4 v4.31.0
// spins on forever instead of reporting: a #define with unbalanced
// parentheses (with EvalAllMacros it evaluates "#define X ((void *" without
// end), and a file whose last newline is spliced away by a backslash before
// it. A character constant, string literal or #include name left open on
// such a last line never meets the newline that would end it, and the
// scanner keeps reading at the end of the file.
func screenHeaders(dir string) error {
	for _, sub := range []string{"infiniband", "rdma"} {
		files, _ := filepath.Glob(filepath.Join(dir, sub, "*.h"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if line := splicedLastNewline(data); line > 0 {
				return fmt.Errorf("%s:%d: the file ends in a line continuation (a backslash before its last newline)", f, line)
			}
			if line, name := unbalancedDefine(stripComments(string(data))); line > 0 {
				return fmt.Errorf("%s:%d: macro %s has unbalanced parentheses", f, line, name)
			}
		}
	}
	return nil
}

// splicedLastNewline returns the line of the backslash that splices away a
// file's last newline, or 0 if there is none. cc/v4 adds the newline a file
// lacks before it splices lines, so a file ending in a backslash counts too.
func splicedLastNewline(data []byte) int {
	rest := bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
	if !bytes.HasSuffix(rest, []byte("\\")) {
		return 0
	}
	return bytes.Count(rest, []byte("\n")) + 1
}

// unbalancedDefine returns the line and name of the first #define whose
// replacement list (continuation lines joined, comments and literals
// ignored) has unbalanced parentheses.
func unbalancedDefine(src string) (int, string) {
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		text := lines[i]
		for strings.HasSuffix(strings.TrimRight(text, " \t\r"), "\\") && i+1 < len(lines) {
			text = strings.TrimSuffix(strings.TrimRight(text, " \t\r"), "\\") + " " + lines[i+1]
			i++
		}
		t := strings.TrimSpace(text)
		if !strings.HasPrefix(t, "#") {
			continue
		}
		t = strings.TrimSpace(t[1:])
		if !strings.HasPrefix(t, "define") {
			continue
		}
		t = strings.TrimSpace(t[len("define"):])
		name := t
		if j := strings.IndexAny(t, "( \t"); j >= 0 {
			name = t[:j]
		}
		if parenDepth(t) != 0 {
			return start + 1, name
		}
	}
	return 0, ""
}

// stripComments blanks out C comments, keeping newlines so that line
// numbers stay right, and leaves string and character literals alone.
func stripComments(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c == '\'':
			for i++; i < len(b) && b[i] != c && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			j := i
			for ; j < len(b) && !(b[j] == '*' && j+1 < len(b) && b[j+1] == '/' && j > i+1); j++ {
				if b[j] != '\n' {
					b[j] = ' '
				}
			}
			for k := j; k < len(b) && k < j+2; k++ {
				b[k] = ' '
			}
			i = j + 1
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		}
	}
	return string(b)
}

// parenDepth is the parenthesis balance of C text (comments already
// removed), skipping string and character literals.
func parenDepth(s string) int { return depth(s, '(', ')') }

// depth is the balance of the brackets open and close in C text (comments
// already removed), skipping string and character literals.
func depth(s string, open, close byte) int {
	d := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\'':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case c == open:
			d++
		case c == close:
			d--
		}
	}
	return d
}

// pragmaOperatorSource is the source name cc/v4 gives the text of a
// _Pragma operator when it rescans it.
const pragmaOperatorSource = "_Pragma_"

// pragmaOperatorPack matches a _Pragma operator whose pragma is pack.
var pragmaOperatorPack = regexp.MustCompile(`_Pragma\s*\(\s*"\s*pack\b`)

// pragmaOperator finds the first _Pragma("pack...") in the headers under
// dir, in lexical order of their paths, by reading their text.
func pragmaOperator(dir string) (Pos, bool) {
	var found Pos
	ok := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".h") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for i, line := range strings.Split(string(data), "\n") {
			if loc := pragmaOperatorPack.FindStringIndex(line); loc != nil {
				rel, _ := filepath.Rel(dir, path)
				found, ok = Pos{File: filepath.ToSlash(rel), Line: i + 1, Col: loc[0] + 1}, true
				return filepath.SkipAll
			}
		}
		return nil
	})
	return found, ok
}
