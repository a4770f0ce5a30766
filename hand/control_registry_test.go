package hand

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
)

// Once an object is destroyed, its address may go to a new one, made and
// registered on another goroutine before the first's Close forgets it:
// that Close must not forget the new object, whose async events would
// then come back without it.
func TestUnregisterKeepsReusedAddress(t *testing.T) {
	c := &Context{reg: &registry{m: map[unsafe.Pointer]any{}}}
	var mem [8]byte
	raw := unsafe.Pointer(&mem)
	old, reused := &CQ{}, &CQ{}
	c.register(raw, old)
	c.register(raw, reused) // old destroyed, its address reused
	c.unregister(raw, old)  // old's Close ends
	require.Same(t, reused, c.lookup(raw))
	c.unregister(raw, reused)
	require.Nil(t, c.lookup(raw))
}

// librdmacm has one ibv_context a device, which hand wraps afresh each
// time it is asked (CMContext, Conn.Context, ConnRequest.Context): what is
// made through one wrapper is found through any other, so that an async
// event read through CMContext names a Conn's QP. Before, each wrapper
// had its own registry, and the event came back with no QP.
func TestBorrowedContextsShareRegistry(t *testing.T) {
	var raw, other verbs.Context
	cm, conn := newContext(&raw, "rxe0", true), newContext(&raw, "rxe0", true)
	var mem [8]byte
	q := &QP{}
	conn.register(unsafe.Pointer(&mem), q)
	require.Same(t, q, cm.lookup(unsafe.Pointer(&mem)), "registered through another wrapper of the same context")
	require.Nil(t, newContext(&other, "rxe1", true).lookup(unsafe.Pointer(&mem)), "another device")
	opened := newContext(&raw, "rxe0", false) // ibv_open_device's own context: a registry of its own
	require.Nil(t, opened.lookup(unsafe.Pointer(&mem)))
	cm.unregister(unsafe.Pointer(&mem), q)
	require.Nil(t, conn.lookup(unsafe.Pointer(&mem)))
}
