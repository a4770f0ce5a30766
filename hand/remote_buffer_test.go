package hand_test

import (
	"encoding"
	"encoding/binary"
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

var (
	_ encoding.BinaryMarshaler   = hand.RemoteBuffer{}
	_ encoding.BinaryAppender    = hand.RemoteBuffer{}
	_ encoding.BinaryUnmarshaler = (*hand.RemoteBuffer)(nil)
)

// rpingInfo is struct rping_rdma_info as rdma-core's rping fills it
// (rping_format_send: htobe64(buf), htobe32(rkey), htobe32(size)), written
// here field by field, apart from the code under test.
func rpingInfo(addr uint64, rkey, size uint32) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[0:], addr)
	binary.BigEndian.PutUint32(b[8:], rkey)
	binary.BigEndian.PutUint32(b[12:], size)
	return b
}

func newRemote(t *testing.T, addr uint64, n int, rkey uint32) hand.RemoteBuffer {
	t.Helper()
	r, err := hand.NewRemoteBuffer(addr, n, rkey)
	require.NoError(t, err)
	return r
}

func TestRemoteBufferWireFormat(t *testing.T) {
	r := newRemote(t, 0x7f0012345000, 64, 0xabcd1234)
	got, err := r.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, rpingInfo(0x7f0012345000, 0xabcd1234, 64), got, "rping's struct rping_rdma_info")
	require.Len(t, got, hand.RemoteBufferSize)

	var back hand.RemoteBuffer
	require.NoError(t, back.UnmarshalBinary(got))
	require.Equal(t, r, back)
	require.Equal(t, uint64(0x7f0012345000), back.Addr())
	require.Equal(t, 64, back.Len())
	require.Equal(t, uint32(0xabcd1234), back.RKey())
	require.Equal(t, "64 bytes at 0x7f0012345000, rkey 0xabcd1234", back.String())

	// The zero value is rping's "go ahead": 16 zero bytes.
	zero, err := hand.RemoteBuffer{}.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, make([]byte, 16), zero)

	// AppendBinary appends, in place when there is room.
	dst := make([]byte, 3, 32)
	out, err := r.AppendBinary(dst)
	require.NoError(t, err)
	require.Equal(t, append(make([]byte, 3), got...), out)
	require.Same(t, &dst[0], &out[0], "appended in place")
}

func TestRemoteBufferUnmarshalRefuses(t *testing.T) {
	keep := newRemote(t, 0x1000, 8, 9)
	for _, tc := range []struct {
		name  string
		b     []byte
		field string
		says  string
	}{
		{"empty", nil, "data", "0 bytes, want 16"},
		{"short", rpingInfo(0x1000, 1, 64)[:15], "data", "15 bytes, want 16"},
		{"long", append(rpingInfo(0x1000, 1, 64), 0), "data", "17 bytes, want 16"},
		{"wraps", rpingInfo(math.MaxUint64-10, 1, 64), "length", "64 bytes at 0xfffffffffffffff5 run past the end of the 64-bit address space"},
		{"wraps by one", rpingInfo(math.MaxUint64, 1, 2), "length", "run past the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := keep
			err := r.UnmarshalBinary(tc.b)
			var ae *hand.AttrError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "RemoteBuffer.UnmarshalBinary", ae.Op)
			require.Equal(t, tc.field, ae.Field)
			require.ErrorContains(t, err, tc.says)
			require.ErrorIs(t, err, syscall.EINVAL)
			require.Equal(t, keep, r, "a refused decode leaves the value as it was")
		})
	}
	// The edges that are accepted: the last byte of the address space, and
	// an empty buffer (what Slice(n, 0) makes; rping's go-ahead).
	for _, b := range [][]byte{rpingInfo(math.MaxUint64, 1, 1), rpingInfo(math.MaxUint64-63, 1, 64),
		rpingInfo(0x1000, 1, 0), rpingInfo(math.MaxUint64, 1, 0), make([]byte, 16)} {
		var r hand.RemoteBuffer
		require.NoError(t, r.UnmarshalBinary(b), "%x", b)
	}
}

func TestNewRemoteBuffer(t *testing.T) {
	_, err := hand.NewRemoteBuffer(0x1000, -1, 1)
	require.ErrorContains(t, err, "NewRemoteBuffer: length: -1: negative")
	_, err = hand.NewRemoteBuffer(math.MaxUint64-1, 3, 1)
	require.ErrorContains(t, err, "NewRemoteBuffer: length: 3 bytes at 0xfffffffffffffffe run past the end")
	r := newRemote(t, math.MaxUint64-1, 2, 1)
	require.Equal(t, 2, r.Len())

	// Longer than the format's 32-bit length: refused by AppendBinary,
	// which leaves b as it was; a Slice of it marshals.
	big := newRemote(t, 0x10000, 1<<32, 5)
	b := []byte{1, 2}
	out, err := big.AppendBinary(b)
	require.ErrorContains(t, err, "RemoteBuffer.AppendBinary: length: 4294967296 bytes, more than the format's 32 bits")
	require.Equal(t, []byte{1, 2}, out)
	_, err = big.MarshalBinary()
	require.Error(t, err)
	part, err := big.Slice(1<<32-math.MaxUint32, math.MaxUint32)
	require.NoError(t, err)
	m, err := part.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, rpingInfo(0x10001, 5, math.MaxUint32), m)
}

func TestRemoteBufferSlice(t *testing.T) {
	r := newRemote(t, 0x1000, 100, 7)
	for _, tc := range []struct{ off, n int }{{0, 100}, {0, 0}, {100, 0}, {10, 90}, {99, 1}, {37, 12}} {
		s, err := r.Slice(tc.off, tc.n)
		require.NoError(t, err, "Slice(%d, %d)", tc.off, tc.n)
		require.Equal(t, newRemote(t, 0x1000+uint64(tc.off), tc.n, 7), s, "Slice(%d, %d)", tc.off, tc.n)
	}
	for _, tc := range []struct{ off, n int }{{0, 101}, {101, 0}, {1, 100}, {-1, 1}, {0, -1}, {50, math.MaxInt},
		{math.MaxInt, math.MaxInt}, {math.MinInt, 0}} {
		s, err := r.Slice(tc.off, tc.n)
		require.Error(t, err, "Slice(%d, %d) gave %v", tc.off, tc.n, s)
		require.ErrorIs(t, err, syscall.EINVAL)
		require.Equal(t, hand.RemoteBuffer{}, s)
	}
	_, err := r.Slice(90, 20)
	require.EqualError(t, err, "goverbs: RemoteBuffer.Slice: 20 bytes at offset 90 are outside the remote buffer's 100")

	// Slices of slices stay within the first.
	s, err := r.Slice(10, 50)
	require.NoError(t, err)
	s, err = s.Slice(40, 10)
	require.NoError(t, err)
	require.Equal(t, newRemote(t, 0x1000+50, 10, 7), s)
	_, err = s.Slice(0, 11)
	require.Error(t, err)
}

// SetWriteTo, SetWriteImmTo and SetReadFrom fill the WR as SetWrite,
// SetWriteImm and SetRead do with the buffer's address and rkey (what the
// fake provider builds from them is checked in TestSendChainOpcodes), and
// refuse a scatter entry longer than the buffer before touching the WR.
func TestSendChainRemoteBuffer(t *testing.T) {
	c, err := hand.NewSendChain(2, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	remote := newRemote(t, 0x7000, 64, 0x4321)
	local := verbs.SGE{Addr: 0x10000, Length: 64, LKey: 3}
	for _, tc := range []struct {
		name  string
		to    func(v hand.SendWRs, i int, sge verbs.SGE, r hand.RemoteBuffer)
		plain func(v hand.SendWRs, i int, sge verbs.SGE, addr uint64, rkey uint32)
	}{
		{"write",
			func(v hand.SendWRs, i int, sge verbs.SGE, r hand.RemoteBuffer) {
				v.SetWriteTo(i, 1, hand.Signaled, sge, r)
			},
			func(v hand.SendWRs, i int, sge verbs.SGE, addr uint64, rkey uint32) {
				v.SetWrite(i, 1, hand.Signaled, sge, addr, rkey)
			}},
		{"write_imm",
			func(v hand.SendWRs, i int, sge verbs.SGE, r hand.RemoteBuffer) {
				v.SetWriteImmTo(i, 1, hand.Signaled, 9, sge, r)
			},
			func(v hand.SendWRs, i int, sge verbs.SGE, addr uint64, rkey uint32) {
				v.SetWriteImm(i, 1, hand.Signaled, 9, sge, addr, rkey)
			}},
		{"read",
			func(v hand.SendWRs, i int, sge verbs.SGE, r hand.RemoteBuffer) {
				v.SetReadFrom(i, 1, hand.Signaled, sge, r)
			},
			func(v hand.SendWRs, i int, sge verbs.SGE, addr uint64, rkey uint32) {
				v.SetRead(i, 1, hand.Signaled, sge, addr, rkey)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Reset()
			v := c.Reserve(2)
			tc.to(v, 0, local, remote)
			tc.plain(v, 1, local, 0x7000, 0x4321)
			// The same WR but for the chain's own links.
			wr := func(i int) verbs.SendWR { w := *v.WR(i); w.Next, w.SGList = nil, nil; return w }
			require.Equal(t, wr(1), wr(0))
			require.Equal(t, local, *v.WR(0).SGList)

			// A whole buffer, and a part of one, as long as the entry.
			part, err := newRemote(t, 0x6000, 0x2000, 0x4321).Slice(0x1000, 64)
			require.NoError(t, err)
			require.NotPanics(t, func() { tc.to(v, 0, local, part) })
			require.Equal(t, wr(1), wr(0))

			short, err := remote.Slice(1, 63)
			require.NoError(t, err)
			before := wr(0)
			require.PanicsWithError(t, "goverbs: SendWRs: the scatter entry is longer than the remote buffer "+
				"(check lengths from a peer with RemoteBuffer.Slice)", func() { tc.to(v, 0, local, short) })
			require.Equal(t, before, wr(0), "the refused WR is left as it was")
			require.Panics(t, func() { tc.to(v, 0, local, hand.RemoteBuffer{}) }, "an empty buffer")
			require.NotPanics(t, func() { tc.to(v, 0, verbs.SGE{Addr: 0x10000, LKey: 3}, hand.RemoteBuffer{}) },
				"an empty transfer to an empty buffer")
		})
	}
}
