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
