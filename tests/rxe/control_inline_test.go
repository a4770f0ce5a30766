package rxe

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// Inline sends (SendWRs.SetInline) on rxe, whose provider copies an inline
// WR's payload into the WQE at post time. Lengths from 0 to the QP's
// max_inline_data (both ends, around 16, 32 and 64, and one below the
// limit) land byte for byte and no further, although all of them came from
// one Go buffer overwritten as soon as each SetInline returned:
// the payload is copied into the chain's C staging, which the WR's SGE
// points at. 16 bytes takes SetInline's fixed-size path, the others copy.
func TestControlInlineSend(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	limit := a.Caps().MaxInlineData
	require.GreaterOrEqual(t, limit, 64, "the QP asked for 64 bytes of inline data")
	var lengths []int
	for _, n := range []int{0, 1, 15, 16, 17, 32, 63, 64, limit - 1, limit} {
		if len(lengths) == 0 || n > lengths[len(lengths)-1] {
			lengths = append(lengths, n)
		}
	}
	slot := (limit + 64) &^ 63 // room for a byte past the longest
	const base = 4096
	require.LessOrEqual(t, base+len(lengths)*slot, len(r.mr.Bytes()), "receive slots must fit the rig's MR")
	buf := r.mr.Bytes()
	for i := range buf[base:] {
		buf[base+i] = 0xee // what a short write would leave showing
	}
	ctlPostRecvSlots(t, b, r.mr, 1000, len(lengths), base, slot, slot)

	c, err := hand.NewSendChain(len(lengths), 1, limit)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(len(lengths))
	src := make([]byte, limit) // Go memory, reused for every WR
	for i, n := range lengths {
		fill(src, i+1)
		v.SetInline(i, uint64(i), hand.Signaled, src[:n])
	}
	fill(src, 0x55) // after the last SetInline: the post must not see this
	require.NoError(t, c.PostSend(a))

	byID := map[uint64]verbs.WC{}
	for _, wc := range ctlReap(t, r.cq, 2*len(lengths)) {
		require.Equal(t, verbs.WCSuccess, wc.Status, "wr_id %d", wc.WRID)
		byID[wc.WRID] = wc
	}
	want := make([]byte, limit)
	for i, n := range lengths {
		require.Equal(t, verbs.WCSend, byID[uint64(i)].Opcode, "inline send of %d bytes", n)
		recv := byID[1000+uint64(i)]
		require.Equal(t, verbs.WCRecv, recv.Opcode, "receive of the %d-byte inline send", n)
		require.Equal(t, uint32(n), recv.ByteLen, "receive of the %d-byte inline send", n)
		fill(want, i+1)
		got := buf[base+i*slot:]
		require.Equal(t, want[:n], got[:n], "payload of the %d-byte inline send", n)
		require.Equal(t, byte(0xee), got[n], "the byte after the %d-byte payload", n)
	}
}

// One byte past the QP's max_inline_data: rxe refuses that WR at post time
// with EINVAL. The PostError names it, the WR before it is sent, and the
// chain keeps it and the one after it; Skip drops it, and the rest,
// re-posted, land.
func TestControlInlineTooLong(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	limit := a.Caps().MaxInlineData
	const base, slot = 4096, 4096
	require.LessOrEqual(t, limit+1, slot)
	ctlPostRecvSlots(t, b, r.mr, 1000, 2, base, slot, slot)

	c, err := hand.NewSendChain(3, 1, limit+1)
	require.NoError(t, err)
	defer c.Close()
	data := make([]byte, limit+1)
	fill(data, 7)
	v := c.Reserve(3)
	v.SetInline(0, 0, hand.Signaled, data[:limit])
	v.SetInline(1, 1, hand.Signaled, data)
	v.SetInline(2, 2, hand.Signaled, data[:1])

	err = c.PostSend(a)
	var pe *hand.PostError
	require.True(t, errors.As(err, &pe), "posting %d bytes inline past max_inline_data %d: %v", limit+1, limit, err)
	require.Equal(t, hand.PostError{Op: "ibv_post_send", Index: 1, Posted: 1, Errno: syscall.EINVAL}, *pe)
	require.Equal(t, 2, c.Len(), "the refused WR and the one after it stay in the chain")
	c.Skip()
	require.NoError(t, c.PostSend(a), "re-posting what followed the refused WR")

	byID := map[uint64]verbs.WC{}
	for _, wc := range ctlReap(t, r.cq, 4) {
		require.Equal(t, verbs.WCSuccess, wc.Status, "wr_id %d", wc.WRID)
		byID[wc.WRID] = wc
	}
	require.NotContains(t, byID, uint64(1), "the refused WR completed")
	buf := r.mr.Bytes()
	require.Equal(t, uint32(limit), byID[1000].ByteLen)
	require.Equal(t, data[:limit], buf[base:base+limit])
	require.Equal(t, uint32(1), byID[1001].ByteLen)
	require.Equal(t, data[:1], buf[base+slot:base+slot+1])
}
