package hand_test

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// mwOnPage makes a type typ window and an MR of 8192 bytes at 0x10000 over
// struct ibv_mw and ibv_mr in a page of C-like memory (outside the Go
// heap, as a provider's are), unmapped when the test ends.
func mwOnPage(t testing.TB, typ hand.MWType, rkey uint32) (*hand.MW, *hand.MR, *verbs.MW, *verbs.MR) {
	t.Helper()
	page, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Munmap(page) })
	rawMW := (*verbs.MW)(unsafe.Pointer(&page[0]))
	rawMR := (*verbs.MR)(unsafe.Pointer(&page[256]))
	rawMW.RKey = rkey
	rawMR.LKey = 0x4242
	return hand.MWOn(rawMW, typ), hand.MROn(rawMR, 0x10000, 8192), rawMW, rawMR
}

// SetBindMW fills a bind that rxe's checks accept (no scatter entries, no
// immediate data, the window's key as of the previous bind in struct
// ibv_mw, the next key in the WR) and refuses, with WR i untouched, what
// no device would bind.
func TestSetBindMW(t *testing.T) {
	mw, mr, rawMW, rawMR := mwOnPage(t, hand.MWType2, 0x1234ff)
	c, err := hand.NewSendChain(2, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(2)
	v.SetSend(0, 1, hand.Signaled, hand.SGE{Addr: 1, Length: 2, LKey: 3})
	rkey := v.SetBindMW(0, 7, hand.Signaled, mw, mr, 4096, 1024, hand.AccessRemoteWrite)
	require.Equal(t, uint32(0x123400), rkey, "the low 8 bits wrap, the index stays")
	require.Equal(t, rkey, mw.RKey())
	require.Equal(t, uint32(0x1234ff), rawMW.RKey, "struct ibv_mw keeps the key the device has until the bind runs")
	w := v.WR(0)
	require.Equal(t, verbs.WROpBindMW, w.Opcode)
	require.Equal(t, uint64(7), w.WRID)
	require.Zero(t, w.NumSGE)
	require.Zero(t, w.ImmData)
	require.Equal(t, rawMW, w.BindMW.MW)
	require.Equal(t, rkey, w.BindMW.RKey)
	require.Equal(t, rawMR, w.BindMW.BindInfo.MR)
	require.Equal(t, uint64(0x10000+4096), w.BindMW.BindInfo.Addr)
	require.Equal(t, uint64(1024), w.BindMW.BindInfo.Length)
	require.Equal(t, verbs.AccessRemoteWrite, w.BindMW.BindInfo.MWAccessFlags)

	// The next bind carries the previous one's key in struct ibv_mw.
	next := v.SetBindMW(1, 8, 0, mw, mr, 0, 8192, hand.AccessRemoteRead)
	require.Equal(t, uint32(0x123401), next)
	require.Equal(t, rkey, rawMW.RKey)

	v.SetSendInv(1, 9, hand.Signaled, hand.SGE{Addr: 5, Length: 6, LKey: 7}, 0xabcdef)
	w = v.WR(1)
	require.Equal(t, verbs.WROpSendWithInv, w.Opcode)
	require.Equal(t, int32(1), w.NumSGE)
	require.Equal(t, uint32(0xabcdef), *w.InvalidateRKey())
	require.Equal(t, hand.SGE{Addr: 5, Length: 6, LKey: 7}, *w.SGList)
	v.SetLocalInv(1, 10, 0, 0x123401)
	require.Equal(t, verbs.WROpLocalInv, w.Opcode)
	require.Zero(t, w.NumSGE)
	require.Equal(t, uint32(0x123401), *w.InvalidateRKey())

	before := *v.WR(0)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"type 1", func() {
			mw1, _, _, _ := mwOnPage(t, hand.MWType1, 0x100)
			v.SetBindMW(0, 1, 0, mw1, mr, 0, 1, hand.AccessRemoteRead)
		}},
		{"empty", func() { v.SetBindMW(0, 1, 0, mw, mr, 0, 0, hand.AccessRemoteRead) }},
		{"negative offset", func() { v.SetBindMW(0, 1, 0, mw, mr, -1, 1, hand.AccessRemoteRead) }},
		{"past the end", func() { v.SetBindMW(0, 1, 0, mw, mr, 8000, 193, hand.AccessRemoteRead) }},
		{"wrapping", func() { v.SetBindMW(0, 1, 0, mw, mr, 1, int(^uint(0)>>1), hand.AccessRemoteRead) }},
	} {
		require.Panics(t, tc.f, tc.name)
		require.Equal(t, before, *v.WR(0), "%s: WR 0 changed", tc.name)
		require.Equal(t, next, mw.RKey(), "%s: the key moved", tc.name)
	}
	mw.MarkClosed()
	require.PanicsWithError(t, "goverbs: SendWRs.SetBindMW: the window or the MR: goverbs: object is closed",
		func() { v.SetBindMW(0, 1, 0, mw, mr, 0, 1, hand.AccessRemoteRead) })
	require.Equal(t, before, *v.WR(0))
	c.Reset()
}
