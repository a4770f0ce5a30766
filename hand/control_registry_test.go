package hand

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Once an object is destroyed, its address may go to a new one, made and
// registered on another goroutine before the first's Close forgets it:
// that Close must not forget the new object, whose async events would
// then come back without it.
func TestUnregisterKeepsReusedAddress(t *testing.T) {
	c := &Context{reg: map[unsafe.Pointer]any{}}
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
