package gen

import "os"

// FailRenameAfter makes rename number n+1 of Write fail (every other one
// succeeds) until the returned function restores os.Rename.
func FailRenameAfter(n int) (restore func()) {
	calls := 0
	rename = func(from, to string) error {
		if calls++; calls == n+1 {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: os.ErrPermission}
		}
		return os.Rename(from, to)
	}
	return func() { rename = os.Rename }
}

// SymbolPrefix is symbolPrefix, for the tests of package gen_test.
var SymbolPrefix = symbolPrefix

// MemberExpr is the Go expression that reaches the member at path (C
// names, from record r) of a value v of r's Go type: v.PerTransportCaps.
// RcODPCaps for a field, (*v.Name()) for an accessor; false if the path
// names no member of r's Go layout.
func MemberExpr(r *Record, path []string, v string) (string, bool) {
	for i, c := range path {
		var found *item
		for _, it := range layoutOf(r) {
			if it.cPath == c && (it.kind == itemField || it.kind == itemAccessor) {
				found = &it
				break
			}
		}
		if found == nil {
			return "", false
		}
		if found.kind == itemAccessor {
			v = "(*" + v + "." + found.goName + "())"
		} else {
			v += "." + found.goName
		}
		if i < len(path)-1 {
			if found.typ.Kind != KRecord {
				return "", false
			}
			r = found.typ.Record
		}
	}
	return v, true
}
