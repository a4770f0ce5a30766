package hand_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/cmem"
	"github.com/goverbs/goverbs/generated/verbs"
)

// A receive chain and a completion array in cmem's C memory, posted and
// polled through the generated stubs alone, as docs/generated.md shows a
// program without unsafe doing it: the records' pointer fields (Next,
// SGList) point into C memory, so cgo's pointer check passes where a Go
// chain would panic; the provider reads each SGE's address, from
// cmem.Addr, into its WQE; the completions come back with their wr_ids.
// Reposting and polling allocate nothing.
//
// (verbs.Devices, RegMRSlice and CQEvent need more of a device than the
// fake provider has, which is only the data path's ops: their host tests,
// in generated/verbs, take their error paths; tests/rxe takes the rest on
// soft-RoCE.)
func TestGeneratedCmemChain(t *testing.T) {
	const n, slot = 4, 64
	r := newRig(t, rigOpts{})
	buf := cmem.NewSlice[byte](n * slot)
	wrs, sges := cmem.NewSlice[verbs.RecvWR](n), cmem.NewSlice[verbs.SGE](n)
	wcs := cmem.NewSlice[verbs.WC](n)
	bad := cmem.New[*verbs.RecvWR]()
	defer func() {
		cmem.FreeSlice(buf)
		cmem.FreeSlice(wrs)
		cmem.FreeSlice(sges)
		cmem.FreeSlice(wcs)
		cmem.Free(bad)
	}()
	for i := range n {
		sges[i] = verbs.SGE{Addr: cmem.Addr(buf[i*slot:]), Length: slot, LKey: 0x1234}
		wrs[i] = verbs.RecvWR{WRID: uint64(100 + i), SGList: &sges[i], NumSGE: 1}
		if i > 0 {
			wrs[i-1].Next = &wrs[i]
		}
	}

	require.NoError(t, verbs.PostRecv(r.qp, &wrs[0], bad))
	st := r.fqp.RecvStats()
	require.Equal(t, uint64(n), st.Posted)
	stride := int(st.Head) / n // basic blocks per receive WQE
	for i := range n {
		wqe := r.fqp.RecvWQE(uint32(i * stride))
		require.Equal(t, uint32(slot), binary.BigEndian.Uint32(wqe[0:]), "WQE %d: byte_count", i)
		require.Equal(t, cmem.Addr(buf[i*slot:]), binary.BigEndian.Uint64(wqe[8:]), "WQE %d: the SGE's address", i)
	}
	got, err := verbs.PollCQ(r.vcq, n, &wcs[0])
	require.NoError(t, err)
	require.Equal(t, n, got)
	for i, wc := range wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
		require.Equal(t, uint64(100+i), wc.WRID)
		require.Equal(t, uint32(slot), wc.ByteLen)
	}

	requireNoAllocs(t, "verbs.PostRecv and verbs.PollCQ over cmem records", func() {
		if err := verbs.PostRecv(r.qp, &wrs[0], bad); err != nil {
			t.Fatal(err)
		}
		if got, err := verbs.PollCQ(r.vcq, n, &wcs[0]); got != n || err != nil {
			t.Fatal(got, err)
		}
	})
}
