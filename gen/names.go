package gen

import (
	"fmt"
	"go/token"
	"go/types"
	"os"
	"sort"
	"strings"
	"unicode"
)

// initialisms are words spelled in capitals in Go names, with their Go
// spelling. One table for every package, so a name reads the same everywhere.
var initialisms = map[string]string{}

// mixedInitialisms are the initialisms spelled in mixed case (RKey, IPv4):
// a parameter starting with one lowers all of it (rkey, not rKey).
var mixedInitialisms []string

func init() {
	for _, w := range strings.Fields(`ABI ACK AH API ASYNC CM CPU CQ CQE CQN CSUM DC DCT DGID DLID DM DMA
		ECE EQ ESP FD FW GID GRE GRH GUID HW IB ID IO IOVA IP IPOIB LID LMC MAC MAD MPLS MR MTU MW NAK
		ODP PCI PD PSN QP QPN QPS QPT RC RD RDMA RNR RQ RSS RWQ RX SA SG SGE SGID SL SLID SM SQ SRQ SRQN
		SW TCP TD TM TSO TX UAR UC UD UDP UVERBS VF VL VLAN VXLAN WC WQ WQE WQN WR XRC XRCD ASIC`) {
		initialisms[strings.ToLower(w)] = w
	}
	// InfiniBand's keys (L_Key, R_Key, Q_Key, P_Key, M_Key) read as one
	// initialism and a word, as hand spells them.
	for _, w := range strings.Fields(`IPv4 IPv6 RoCE QoS LKey RKey QKey PKey PKeys MKey`) {
		initialisms[strings.ToLower(w)] = w
		mixedInitialisms = append(mixedInitialisms, w)
	}
	delete(initialisms, "uverbs")
	delete(initialisms, "async")
}

// Prefix is a naming rule: a C identifier starting with C gets Go in its
// place before it is camel-cased.
type Prefix struct{ C, Go string }

// PackageSpec says which headers a generated package owns and how its names read.
type PackageSpec struct {
	Name     string   // Go package name, also its directory under the output root
	Headers  []string // header paths (relative to the include directory) it owns
	Includes []string // headers its cgo preamble includes
	// Library is the shared library whose functions the package loads at
	// run time (see loaderFile in emit_loader.go); empty Soname: none.
	Library  Library
	Prefixes []Prefix // tried in order; the first match is stripped
	// DataPath are name prefixes of data-path functions, whose pointers
	// the stubs pass unchecked, with #cgo noescape and nocallback (see
	// emit_unchecked.go).
	DataPath []string
	// Renames maps a C name (tag, typedef, constant or function) to a Go
	// name where the rules collide. Each entry is a named patch: one that
	// no longer matches anything is listed in IR.StalePatches and by
	// -report (an older or newer release may still need it).
	Renames map[string]string
	// EnumPrefixes maps an enum tag to the naming rule of its enumerators,
	// where the package-wide rule would collide with a type or function
	// (IBV_WR_SEND and ibv_wr_send): the whole enum is renamed alike.
	EnumPrefixes map[string]Prefix
	// Retypes gives an integer that carries an enum's flags or values the
	// Go type of that enum, so that a caller writes
	// verbs.AccessLocalWrite|verbs.AccessRemoteWrite where C takes an int,
	// with no conversion. See Retype for the keys; each entry is a named
	// patch, reported stale like Renames when it matches nothing.
	Retypes map[string]Retype
	// NoRDMA marks the failures of the package's functions that mean this
	// host has no RDMA to offer (see NoRDMA), keyed by C function name;
	// an entry that matches no function is a stale patch.
	NoRDMA map[string]NoRDMA
}

// Library is a shared library a generated package opens with dlopen.
type Library struct {
	Soname  string // "libibverbs.so.1"
	Package string // the Debian and Ubuntu package that installs it
}

// owns reports whether a header belongs to the package.
func (s *PackageSpec) owns(file string) bool {
	for _, h := range s.Headers {
		if h == file {
			return true
		}
	}
	return false
}

// GoName turns a C identifier into a Go one: strip the first matching
// prefix, split at underscores, spell initialisms in capitals.
func GoName(c string, prefixes []Prefix) string {
	lead := len(c) - len(strings.TrimLeft(c, "_"))
	name := c[lead:]
	goPrefix := ""
	for _, p := range prefixes {
		if strings.HasPrefix(name, p.C) && len(name) > len(p.C) {
			name, goPrefix = name[len(p.C):], p.Go
			break
		}
	}
	var b strings.Builder
	if lead > 0 {
		// __ibv_reg_mr and ___ibv_query_port are the inline bodies behind
		// the public macros: keep them, marked as internal.
		b.WriteString(strings.Repeat("X", lead))
	}
	b.WriteString(goPrefix)
	prevDigit := false
	for _, w := range strings.Split(name, "_") {
		if w == "" {
			continue
		}
		// IBV_RATE_2_5_GBPS must not become Rate25Gbps, the name of IBV_RATE_25_GBPS.
		if prevDigit && w[0] >= '0' && w[0] <= '9' {
			b.WriteByte('_')
		}
		b.WriteString(goWord(w))
		prevDigit = w[len(w)-1] >= '0' && w[len(w)-1] <= '9'
	}
	return b.String()
}

// goWord spells one underscore-separated word of a C name.
func goWord(w string) string {
	if w == "" {
		return ""
	}
	if s, ok := initialisms[strings.ToLower(w)]; ok {
		return s
	}
	// iova2 -> IOVA2, like iova -> IOVA
	if d := strings.TrimRight(w, "0123456789"); d != w && d != "" {
		if s, ok := initialisms[strings.ToLower(d)]; ok {
			return s + w[len(d):]
		}
	}
	if strings.ToUpper(w) == w || strings.ToLower(w) == w {
		w = strings.ToLower(w)
	}
	r := []rune(w)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// fieldName is the Go name of a C member or parameter (no prefix stripping).
func fieldName(c string) string {
	n := GoName(strings.TrimLeft(c, "_"), nil)
	if n == "" || !unicode.IsLetter([]rune(n)[0]) {
		n = "F" + n
	}
	return n
}

// stubNames are what a stub's body names besides its parameters: its
// locals and the packages it qualifies. A parameter of the same name would
// shadow them, and the stub would not compile.
var stubNames = map[string]bool{"r": true, "err": true, "unsafe": true, "C": true, "structs": true,
	"syscall": true, "verberr": true, "verbs": true, "rdmacm": true, "_": true}

// paramName is a lower-camel Go parameter name that is not a keyword, nor
// one of stubNames.
func paramName(c string, i int) string {
	if c == "" {
		return fmt.Sprintf("arg%d", i)
	}
	n := fieldName(c)
	// lower the leading initialism or word: QPNum -> qpNum, Context -> context
	r := []rune(n)
	j := 0
	for j < len(r) && unicode.IsUpper(r[j]) {
		j++
	}
	if j > 1 && j < len(r) {
		j-- // keep the start of the next word: QPNum -> qpNum
	}
	if j == 0 {
		j = 1
	}
	for _, w := range mixedInitialisms {
		// RKey -> rkey, InvalidateRKey stays as it is
		if rest := strings.TrimPrefix(n, w); rest != n && (rest == "" || !unicode.IsLower([]rune(rest)[0])) {
			j = len([]rune(w))
		}
	}
	n = strings.ToLower(string(r[:j])) + string(r[j:])
	if token.IsKeyword(n) || stubNames[n] || predeclaredValueOrType(n) {
		n += "_"
	}
	return n
}

// predeclaredValueOrType reports whether n is one of Go's predeclared types
// or constants (uint32, bool, nil, ...): a stub spells those (its result
// conversion uint32(r), its nil error), so a parameter of that name would
// shadow them and the stub would not compile. Predeclared functions (len,
// cap) are left alone: no stub calls one, and rdma-core names parameters len.
func predeclaredValueOrType(n string) bool {
	switch types.Universe.Lookup(n).(type) {
	case *types.TypeName, *types.Const, *types.Nil:
		return true
	}
	return false
}

// systemHomes places each C library type (and each incomplete type declared
// outside the target headers) in the first package, in table order, that
// uses it: that package's headers include its declaration, which the
// package's layout assertions need.
func systemHomes(ir *IR, specs []PackageSpec, pkgOf func(string) *PackageSpec) map[*Record]*PackageSpec {
	home := map[*Record]*PackageSpec{}
	var visit func(t *Type, spec *PackageSpec)
	visit = func(t *Type, spec *PackageSpec) {
		for ; t != nil; t = t.Elem {
			r := t.Record
			switch {
			case r == nil:
			case (r.System || pkgOf(r.Pos.File) == nil) && home[r] == nil:
				home[r] = spec
			case r.Parent != nil && r.ParentMember == "":
				// an anonymous member is not in ir.Records: look inside
				for _, m := range r.Members {
					visit(m.Type, spec)
				}
			}
		}
	}
	for i := range specs {
		spec := &specs[i]
		for _, r := range ir.Records {
			owner := r
			for owner.Parent != nil {
				owner = owner.Parent
			}
			if pkgOf(owner.Pos.File) != spec {
				continue
			}
			for _, m := range r.Members {
				visit(m.Type, spec)
			}
		}
		for _, f := range ir.Funcs {
			if pkgOf(f.Pos.File) != spec {
				continue
			}
			visit(f.Result, spec)
			for _, p := range f.Params {
				visit(p.Type, spec)
			}
		}
	}
	for _, r := range ir.Records {
		if home[r] == nil {
			home[r] = &specs[0]
		}
	}
	return home
}

// Names assigns every declaration in the IR its package and Go name, and
// fails on a collision, naming both C declarations and the patch table.
// Then it applies the packages' type patches (Retypes, NoRDMA; see
// applyPatches), which need the enums' Go names.
func Names(ir *IR, specs []PackageSpec) error {
	pkgOf := func(file string) *PackageSpec {
		for i := range specs {
			if specs[i].owns(file) {
				return &specs[i]
			}
		}
		return nil
	}
	used := map[string]bool{}
	name := func(spec *PackageSpec, c string) string {
		if n, ok := spec.Renames[c]; ok {
			used[spec.Name+"\x00"+c] = true
			return n
		}
		return GoName(c, spec.Prefixes)
	}
	type decl struct {
		what string
		pos  Pos
	}
	scopes := map[string]map[string]decl{}
	var collisions []string
	declare := func(pkg, goName, what string, pos Pos) {
		s := scopes[pkg]
		if s == nil {
			s = map[string]decl{}
			scopes[pkg] = s
		}
		if old, ok := s[goName]; ok {
			collisions = append(collisions, fmt.Sprintf("%s: %s and %s (%s) both become %s.%s: add a rename to the package's Renames table",
				pos, what, old.what, old.pos, pkg, goName))
			return
		}
		s[goName] = decl{what, pos}
	}
	unowned := func(what string, pos Pos) error {
		return fmt.Errorf("%s: %s: no package owns header %s", pos, what, pos.File)
	}

	home := systemHomes(ir, specs, pkgOf)
	for _, r := range ir.Records {
		if r.Parent != nil {
			continue
		}
		spec := pkgOf(r.Pos.File)
		if r.System || spec == nil && r.Incomplete {
			spec = home[r]
		}
		if spec == nil {
			return unowned(r.Describe(), r.Pos)
		}
		r.Package, r.GoName = spec.Name, name(spec, r.CName)
		declare(r.Package, r.GoName, r.Describe(), r.Pos)
	}
	var nested func(r *Record) string
	nested = func(r *Record) string { // a nested record is named after its parent
		if r.GoName == "" && r.Parent != nil {
			member, _, _ := strings.Cut(r.ParentMember, "[") // "grid[0][0]": the element of member grid
			r.GoName = nested(r.Parent) + fieldName(member)
			r.Package = r.Parent.Package
		}
		return r.GoName
	}
	for _, r := range ir.Records {
		if r.Parent == nil {
			continue
		}
		nested(r)
		declare(r.Package, r.GoName, r.Describe(), r.Pos)
	}
	for _, e := range ir.Enums {
		spec := pkgOf(e.Pos.File)
		if spec == nil {
			return unowned("enum "+e.CName, e.Pos)
		}
		e.Package = spec.Name
		if e.CName != "" {
			e.GoName = name(spec, e.CName)
			declare(e.Package, e.GoName, "enum "+e.CName, e.Pos)
		}
		rule, hasRule := spec.EnumPrefixes[e.CName]
		if hasRule {
			used[spec.Name+"\x00enum "+e.CName] = true
		}
		for _, en := range e.Enumerators {
			if _, renamed := spec.Renames[en.Name]; hasRule && !renamed {
				en.GoName = GoName(en.Name, []Prefix{rule})
			} else {
				en.GoName = name(spec, en.Name)
			}
			declare(e.Package, en.GoName, en.Name, en.Pos)
		}
	}
	// assign gives a file-scope macro or function its package and Go name.
	assign := func(what, cName string, pos Pos) (pkg, goName string, err error) {
		spec := pkgOf(pos.File)
		if spec == nil {
			return "", "", unowned(what+" "+cName, pos)
		}
		goName = name(spec, cName)
		declare(spec.Name, goName, what+" "+cName, pos)
		return spec.Name, goName, nil
	}
	var err error
	for _, m := range ir.Macros {
		if m.Package, m.GoName, err = assign("macro", m.Name, m.Pos); err != nil {
			return err
		}
	}
	for _, a := range ir.Aliases {
		if a.Package, a.GoName, err = assign("macro", a.Name, a.Pos); err != nil {
			return err
		}
	}
	for _, f := range ir.Funcs {
		if f.Package, f.GoName, err = assign("function", f.Name, f.Pos); err != nil {
			return err
		}
		seen := map[string]bool{}
		for i, p := range f.Params {
			p.GoName = paramName(p.Name, i)
			for seen[p.GoName] {
				p.GoName += "_"
			}
			seen[p.GoName] = true
		}
	}
	if len(collisions) > 0 {
		more := ""
		if len(collisions) > 1 {
			more = fmt.Sprintf(" (and %d more collisions)", len(collisions)-1)
		}
		if os.Getenv("VERBSGEN_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, strings.Join(collisions, "\n"))
		}
		return fmt.Errorf("%s%s", collisions[0], more)
	}
	var stale []string
	for _, spec := range specs {
		for c := range spec.Renames {
			if !used[spec.Name+"\x00"+c] {
				stale = append(stale, spec.Name+": "+c)
			}
		}
		for c := range spec.EnumPrefixes {
			if !used[spec.Name+"\x00enum "+c] {
				stale = append(stale, spec.Name+": enum "+c)
			}
		}
	}
	more, err := applyPatches(ir, specs)
	if err != nil {
		return err
	}
	stale = append(stale, more...)
	sort.Strings(stale)
	ir.StalePatches = stale
	return nil
}
