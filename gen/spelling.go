package gen

import (
	"sort"
	"strings"

	"modernc.org/cc/v4"
)

// The C wrappers of the cgo preamble (funcsFile) declare their parameters
// and result as the header does, from its tokens: cc/v4's types keep a const
// on a pointed-to base type but not on a pointer (const char *const * comes
// out const char **), and the IR's Type keeps none.

// declSpecifiers maps each declarator of a file-scope declaration or
// function definition to the declaration specifiers it is declared with.
func (m *modeler) declSpecifiers() map[*cc.Declarator]*cc.DeclarationSpecifiers {
	if m.specs != nil {
		return m.specs
	}
	m.specs = map[*cc.Declarator]*cc.DeclarationSpecifiers{}
	for tu := m.l.AST.TranslationUnit; tu != nil; tu = tu.TranslationUnit {
		ed := tu.ExternalDeclaration
		switch {
		case ed == nil:
		case ed.FunctionDefinition != nil:
			m.specs[ed.FunctionDefinition.Declarator] = ed.FunctionDefinition.DeclarationSpecifiers
		case ed.Declaration != nil && ed.Declaration.DeclarationSpecifiers != nil:
			for l := ed.Declaration.InitDeclaratorList; l != nil; l = l.InitDeclaratorList {
				if l.InitDeclarator != nil && l.InitDeclarator.Declarator != nil {
					m.specs[l.InitDeclarator.Declarator] = ed.Declaration.DeclarationSpecifiers
				}
			}
		}
	}
	return m.specs
}

// spellFunc spells the result of function declarator d around the
// function's name and parameter list, and its n parameters each around its
// name. It returns zero Spellings where the declaration does not spell them
// itself (a function declared through a typedef of a function type, K&R
// parameters): the wrappers then spell them from the IR.
func (m *modeler) spellFunc(d *cc.Declarator, n int) (Spelling, []Spelling) {
	specs := m.declSpecifiers()[d]
	fp := funcDeclarator(d)
	if specs == nil || fp == nil {
		return Spelling{}, nil
	}
	var params []Spelling
	switch {
	case fp.Case == cc.DirectDeclaratorFuncIdent && fp.IdentifierList != nil:
		return Spelling{}, nil // int f(a, b) int a, b; {...}
	case fp.Case == cc.DirectDeclaratorFuncParam && fp.ParameterTypeList != nil:
		for l := fp.ParameterTypeList.ParameterList; l != nil; l = l.ParameterList {
			if l.ParameterDeclaration == nil {
				return Spelling{}, nil
			}
			params = append(params, spellParam(l.ParameterDeclaration))
		}
		if n == 0 && len(params) == 1 {
			params = nil // (void)
		}
	}
	if len(params) != n {
		return Spelling{}, nil
	}
	return around(fp, specifierTokens(specs), cc.NodeTokens(d)), params
}

// funcDeclarator finds, in a function's declarator, the part that names it
// and lists its parameters: f(int a) in int (*f(int a))[4].
func funcDeclarator(d *cc.Declarator) *cc.DirectDeclarator {
	return findDirect(d, func(dd *cc.DirectDeclarator) bool {
		return (dd.Case == cc.DirectDeclaratorFuncParam || dd.Case == cc.DirectDeclaratorFuncIdent) &&
			dd.DirectDeclarator != nil && dd.DirectDeclarator.Case == cc.DirectDeclaratorIdent
	})
}

// spellParam spells a parameter declaration around its name. One without
// a name is declared through __typeof__ of its type name, which C lets the
// name follow: __typeof__(int (*)[4]) a.
func spellParam(pd *cc.ParameterDeclaration) Spelling {
	spec := specifierTokens(pd.DeclarationSpecifiers)
	if pd.Declarator != nil {
		if id := declaratorName(pd.Declarator); id != nil {
			return around(id, spec, cc.NodeTokens(pd.Declarator))
		}
		return Spelling{}
	}
	toks := spec
	if pd.AbstractDeclarator != nil {
		toks = append(toks, cc.NodeTokens(pd.AbstractDeclarator)...)
	}
	t := joinTokens(toks)
	switch {
	case t == "":
		return Spelling{}
	case pd.AbstractDeclarator == nil || pd.AbstractDeclarator.DirectAbstractDeclarator == nil:
		// Only pointers, if anything, after the specifiers: the name
		// goes last.
		if !strings.HasSuffix(t, "*") {
			t += " "
		}
		return Spelling{Before: t}
	}
	return Spelling{Before: "__typeof__(" + t + ") "}
}

// declaratorName finds the identifier a declarator declares.
func declaratorName(d *cc.Declarator) *cc.DirectDeclarator {
	return findDirect(d, func(dd *cc.DirectDeclarator) bool { return dd.Case == cc.DirectDeclaratorIdent })
}

// findDirect walks d's direct declarators from the outside in, into
// parenthesized declarators, and returns the first that match accepts, or
// nil when the walk reaches the identifier (or a gap) without one.
func findDirect(d *cc.Declarator, match func(*cc.DirectDeclarator) bool) *cc.DirectDeclarator {
	for dd := d.DirectDeclarator; dd != nil; {
		if match(dd) {
			return dd
		}
		if dd.Case != cc.DirectDeclaratorDecl {
			dd = dd.DirectDeclarator // an identifier's is nil
			continue
		}
		if dd.Declarator == nil {
			return nil
		}
		dd = dd.Declarator.DirectDeclarator
	}
	return nil
}

// specifierTokens are the tokens of the type specifiers and qualifiers
// among declaration specifiers: not static, extern, inline, register or
// attributes, which have no place in a wrapper's declaration (a deprecated
// attribute would warn at cgo's every call).
func specifierTokens(ds *cc.DeclarationSpecifiers) []cc.Token {
	var toks []cc.Token
	for ; ds != nil; ds = ds.DeclarationSpecifiers {
		switch {
		case ds.Case == cc.DeclarationSpecifiersTypeSpec && ds.TypeSpecifier != nil:
			toks = append(toks, cc.NodeTokens(ds.TypeSpecifier)...)
		case ds.Case == cc.DeclarationSpecifiersTypeQual && ds.TypeQualifier != nil && ds.TypeQualifier.Case != cc.TypeQualifierAttr:
			toks = append(toks, cc.NodeTokens(ds.TypeQualifier)...)
		}
	}
	return toks
}

// around spells, from the specifiers' tokens and a declarator's, the text
// before and after the tokens of hole, a part of the declarator.
func around(hole cc.Node, spec, decl []cc.Token) Spelling {
	h := cc.NodeTokens(hole)
	if len(h) == 0 {
		return Spelling{}
	}
	lo, hi := h[0].Seq(), h[len(h)-1].Seq()
	all := append(append([]cc.Token(nil), spec...), decl...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].Seq() < all[j].Seq() })
	var before, after []cc.Token
	for _, t := range all {
		switch s := t.Seq(); {
		case s < lo:
			before = append(before, t)
		case s > hi:
			after = append(after, t)
		}
	}
	b, a := joinTokens(before), joinTokens(after)
	if b == "" {
		return Spelling{}
	}
	if !strings.HasSuffix(b, "*") && !strings.HasSuffix(b, "(") {
		b += " " // int i, not inti; struct ibv_mr *f wherever the header breaks its line
	}
	if len(after) > 0 && len(after[0].Sep()) > 0 {
		a = " " + a
	}
	return Spelling{Before: b, After: a}
}

// joinTokens spells tokens as cc.NodeSource does: one space where the
// source had any separator (white space, a comment, a line break).
func joinTokens(toks []cc.Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && len(t.Sep()) > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.SrcStr())
	}
	return b.String()
}
