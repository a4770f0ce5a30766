package gen

import (
	"testing"

	"modernc.org/token"
)

type at token.Position

func (a at) Position() token.Position { return token.Position(a) }

// TestPosSystemInsideHeaders: with -headers /usr/include the headers
// directory also holds the C library, and its headers are named relative
// to their own system include directory, as on a target whose C library
// lives elsewhere: x86_64's bits/pthreadtypes.h under
// /usr/include/x86_64-linux-gnu is bits/pthreadtypes.h, as arm64's under
// /usr/aarch64-linux-gnu/include is. Named relative to /usr/include it
// sorted apart from arm64's, and verbsgen -targets linux/amd64,linux/arm64
// -headers /usr/include failed pairing the two targets' records.
func TestPosSystemInsideHeaders(t *testing.T) {
	m := &modeler{l: &Loaded{
		Headers: "/usr/include",
		System:  []string{"/usr/include/x86_64-linux-gnu", "/usr/include"},
	}}
	for _, c := range []struct {
		file, want string
		target     bool
	}{
		{"/usr/include/x86_64-linux-gnu/bits/pthreadtypes.h", "bits/pthreadtypes.h", false},
		{"/usr/include/netinet/in.h", "netinet/in.h", false},
		{"/usr/include/infiniband/verbs.h", "infiniband/verbs.h", true},
		{"/usr/include/rdma/rdma_cma.h", "rdma/rdma_cma.h", true},
	} {
		p, target := m.pos(at{Filename: c.file, Line: 72})
		if p.File != c.want || target != c.target {
			t.Errorf("pos(%s) = %s, target %v; want %s, target %v", c.file, p.File, target, c.want, c.target)
		}
	}
}
