package hand_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// The fake's send WQE: a 16-byte control segment (counter << 8 | WR opcode,
// QPN << 8 | segments, flags at byte 11, imm at 12), then the UD, remote
// address and atomic segments the opcode needs, then data segments.
type wqe [fakeprov.WQEBytes]byte

func (w wqe) opcode() verbs.WROpcode { return verbs.WROpcode(binary.BigEndian.Uint32(w[0:]) & 0xff) }
func (w wqe) imm() uint32            { return binary.BigEndian.Uint32(w[12:]) }
func (w wqe) u32(off int) uint32     { return binary.BigEndian.Uint32(w[off:]) }
func (w wqe) u64(off int) uint64     { return binary.BigEndian.Uint64(w[off:]) }

func TestSendChainOpcodes(t *testing.T) {
	const raddr, rkey = 0x200000, 0x5678
	sig := hand.Signaled
	cases := []struct {
		name   string
		add    func(c *hand.SendChain, r *rig, i int)
		op     verbs.WROpcode
		wc     verbs.WCOpcode
		check  func(t *testing.T, w wqe, i int)
		qpType int
	}{
		{"send", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetSend(0, uint64(i), sig, sge(i)) },
			verbs.WROpSend, verbs.WCSend, func(t *testing.T, w wqe, i int) {
				require.Equal(t, sge(i).Addr, w.u64(16+8), "data segment")
			}, 0},
		{"send_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetSendImm(0, uint64(i), sig, 0x01020300+uint32(i), sge(i))
		}, verbs.WROpSendWithImm, verbs.WCSend, func(t *testing.T, w wqe, i int) {
			require.Equal(t, 0x01020300+uint32(i), w.imm(), "imm_data goes out big-endian")
		}, 0},
		{"write", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWrite(0, uint64(i), sig, sge(i), raddr+uint64(i), rkey)
		}, verbs.WROpRDMAWrite, verbs.WCRDMAWrite, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint64(raddr+i), w.u64(16))
			require.Equal(t, uint32(rkey), w.u32(24))
		}, 0},
		{"write_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWriteImm(0, uint64(i), sig, 7, sge(i), raddr+uint64(i), rkey)
		}, verbs.WROpRDMAWriteWithImm, verbs.WCRDMAWrite, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(7), w.imm())
			require.Equal(t, uint64(raddr+i), w.u64(16))
		}, 0},
		{"read", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetRead(0, uint64(i), sig, sge(i), raddr+uint64(i), rkey)
		}, verbs.WROpRDMARead, verbs.WCRDMARead, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint64(raddr+i), w.u64(16))
		}, 0},
		{"write_to", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWriteTo(0, uint64(i), sig, sge(i), remoteAt(raddr+uint64(i), rkey))
		}, verbs.WROpRDMAWrite, verbs.WCRDMAWrite, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint64(raddr+i), w.u64(16))
			require.Equal(t, uint32(rkey), w.u32(24))
		}, 0},
		{"write_imm_to", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWriteImmTo(0, uint64(i), sig, 7, sge(i), remoteAt(raddr+uint64(i), rkey))
		}, verbs.WROpRDMAWriteWithImm, verbs.WCRDMAWrite, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(7), w.imm())
			require.Equal(t, uint64(raddr+i), w.u64(16))
			require.Equal(t, uint32(rkey), w.u32(24))
		}, 0},
		{"read_from", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetReadFrom(0, uint64(i), sig, sge(i), remoteAt(raddr+uint64(i), rkey))
		}, verbs.WROpRDMARead, verbs.WCRDMARead, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint64(raddr+i), w.u64(16))
			require.Equal(t, uint32(rkey), w.u32(24))
		}, 0},
		{"cas", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetCompareSwap(0, uint64(i), sig, sge(i), raddr, rkey, uint64(i), uint64(i)+100)
		}, verbs.WROpAtomicCmpAndSwp, verbs.WCCompSwap, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint64(i)+100, w.u64(32), "swap")
			require.Equal(t, uint64(i), w.u64(40), "compare")
		}, 0},
		{"faa", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetFetchAdd(0, uint64(i), sig, sge(i), raddr, rkey, 5)
		}, verbs.WROpAtomicFetchAndAdd, verbs.WCFetchAdd, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint64(5), w.u64(32), "add")
		}, 0},
		{"inline", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetInline(0, uint64(i), sig, []byte("hello, inline"))
		}, verbs.WROpSend, verbs.WCSend, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(13)|0x80000000, w.u32(16))
			require.Equal(t, "hello, inline", string(w[20:33]))
		}, 0},
		{"ud", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUD(0, uint64(i), sig, sge(i), r.hah, 0x42, 0x11111111)
		}, verbs.WROpSend, verbs.WCSend, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(0x42)|1<<31, w.u32(24))
			require.Equal(t, uint32(0x11111111), w.u32(28))
		}, fakeprov.UD},
		{"ud_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUDImm(0, uint64(i), sig, 9, sge(i), r.hah, 0x42, 0x11111111)
		}, verbs.WROpSendWithImm, verbs.WCSend, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(9), w.imm())
		}, fakeprov.UD},
		{"ud_raw", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUDRaw(0, uint64(i), sig, sge(i), r.ah, 0x43, 0x22222222)
		}, verbs.WROpSend, verbs.WCSend, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(0x43)|1<<31, w.u32(24))
			require.Equal(t, uint32(0x22222222), w.u32(28))
		}, fakeprov.UD},
		{"ud_imm_raw", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUDImmRaw(0, uint64(i), sig, 10, sge(i), r.ah, 0x43, 0x22222222)
		}, verbs.WROpSendWithImm, verbs.WCSend, func(t *testing.T, w wqe, i int) {
			require.Equal(t, uint32(10), w.imm())
			require.Equal(t, uint32(0x43)|1<<31, w.u32(24))
		}, fakeprov.UD},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{typ: tc.qpType})
			c, err := hand.NewSendChain(64, 2, 16)
			require.NoError(t, err)
			defer c.Close()
			for _, n := range []int{1, 8, 64} {
				head := r.fqp.SendStats().Head
				for i := 0; i < n; i++ {
					tc.add(c, r, i)
				}
				require.NoError(t, c.PostSendRaw(r.qp))
				for i := 0; i < n; i++ {
					w := wqe(r.fqp.SendWQE(head + uint32(i)))
					require.Equal(t, tc.op, w.opcode(), "WR %d", i)
					tc.check(t, w, i)
				}
				cs := drain(t, r, n)
				requireIDs(t, cs, 0, n)
				for _, g := range cs {
					require.Equal(t, tc.wc, g.opcode)
				}
			}
		})
	}
}

// remoteAt is a peer's buffer at addr under rkey, as long as the scatter
// entries sge gives.
func remoteAt(addr uint64, rkey uint32) hand.RemoteBuffer {
	r, err := hand.NewRemoteBuffer(addr, int(sge(0).Length), rkey)
	if err != nil {
		panic(err)
	}
	return r
}

func TestUnsignaledSendsCompleteSilently(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewSendChain(8, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 7; i++ {
		c.Reserve(1).SetWrite(0, uint64(i), 0, sge(i), 0x200000, 1)
	}
	c.Reserve(1).SetWrite(0, 7, hand.Signaled, sge(7), 0x200000, 1)
	require.NoError(t, c.PostSendRaw(r.qp))
	cs := drain(t, r, 1)
	require.Equal(t, uint64(7), cs[0].wrID)
	st := r.fqp.SendStats()
	require.Equal(t, st.Head, st.Tail, "the signaled completion releases the unsignaled WRs before it")
}

func TestInlineLimits(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewSendChain(2, 1, 8)
	require.NoError(t, err)
	defer c.Close()
	require.Panics(t, func() { c.Reserve(1).SetInline(0, 1, 0, make([]byte, 9)) }, "longer than the chain's staging")
	c.Reserve(1).SetInline(0, 1, hand.Signaled, nil)
	require.NoError(t, c.PostSendRaw(r.qp))
	drain(t, r, 1)

	big, err := hand.NewSendChain(1, 1, 128)
	require.NoError(t, err)
	defer big.Close()
	big.Reserve(1).SetInline(0, 1, 0, make([]byte, 100))
	var pe *hand.PostError
	require.ErrorAs(t, big.PostSendRaw(r.qp), &pe, "over the QP's max_inline_data (64)")
	require.Equal(t, 0, pe.Index)
}

func TestSendChainSetSGL(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewSendChain(2, 2, 0)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(1)
	v.SetSend(0, 1, hand.Signaled, sge(0))
	v.SetSGL(0, []verbs.SGE{sge(0), sge(1)})
	require.Panics(t, func() { v.SetSGL(0, []verbs.SGE{sge(0), sge(1), sge(2)}) }, "maxSGE is 2")
	require.Equal(t, int32(2), c.WR(0).NumSGE)
	require.Equal(t, int32(2), v.WR(0).NumSGE)
	require.NoError(t, c.PostSendRaw(r.qp))
	cs := drain(t, r, 1)
	require.Equal(t, uint32(128), cs[0].byteLen)
}

func TestRDMAPostvContextRoundTrip(t *testing.T) {
	for _, withSRQ := range []bool{false, true} {
		r := newRig(t, rigOpts{})
		id := r.cmID(t, withSRQ)
		rc, err := hand.NewRecvChain(16, 1)
		require.NoError(t, err)
		defer rc.Close()
		for i := 0; i < 16; i++ {
			rc.Reserve(1).Set(0, 0xC0DE0000+uint64(i), sge(i))
		}
		require.NoError(t, rc.PostRecvvRaw(id))
		cs := drain(t, r, 16)
		for i, g := range cs {
			require.Equal(t, 0xC0DE0000+uint64(i), g.wrID, "the context comes back as wr_id")
			require.Equal(t, verbs.WCRecv, g.opcode)
		}
		if withSRQ {
			require.Equal(t, uint64(16), r.fsrq.Stats().Posted)
		} else {
			require.Equal(t, uint64(16), r.fqp.RecvStats().Posted)
		}
	}

	r := newRig(t, rigOpts{})
	id := r.cmID(t, false)
	conn := hand.ConnOnID(id)
	sc, err := hand.NewSendChain(16, 1, 0)
	require.NoError(t, err)
	defer sc.Close()
	for _, post := range []struct {
		do func() error
		op verbs.WROpcode
		wc verbs.WCOpcode
	}{
		{func() error { return sc.PostSendvRaw(id) }, verbs.WROpSend, verbs.WCSend},
		{func() error { return sc.PostReadvRaw(id) }, verbs.WROpRDMARead, verbs.WCRDMARead},
		{func() error { return sc.PostWritevRaw(id) }, verbs.WROpRDMAWrite, verbs.WCRDMAWrite},
		{func() error { return sc.PostSendv(conn) }, verbs.WROpSend, verbs.WCSend},
		{func() error { return sc.PostReadv(conn) }, verbs.WROpRDMARead, verbs.WCRDMARead},
		{func() error { return sc.PostWritev(conn) }, verbs.WROpRDMAWrite, verbs.WCRDMAWrite},
	} {
		head := r.fqp.SendStats().Head
		for i := 0; i < 4; i++ {
			v := sc.Reserve(1)
			switch post.op {
			case verbs.WROpSend:
				v.SetSend(0, 0xFEED00+uint64(i), hand.Signaled, sge(i))
			case verbs.WROpRDMARead:
				v.SetRead(0, 0xFEED00+uint64(i), hand.Signaled, sge(i), 0x300000+uint64(i), 0x99)
			default:
				v.SetWrite(0, 0xFEED00+uint64(i), hand.Signaled, sge(i), 0x300000+uint64(i), 0x99)
			}
		}
		require.NoError(t, post.do())
		for i := 0; i < 4; i++ {
			w := wqe(r.fqp.SendWQE(head + uint32(i)))
			require.Equal(t, post.op, w.opcode())
			if post.op != verbs.WROpSend {
				require.Equal(t, 0x300000+uint64(i), w.u64(16), "remote address from the WR")
				require.Equal(t, uint32(0x99), w.u32(24))
			}
		}
		cs := drain(t, r, 4)
		for i, g := range cs {
			require.Equal(t, 0xFEED00+uint64(i), g.wrID)
			require.Equal(t, post.wc, g.opcode)
		}
	}
}

// rdma_post_sendv, rdma_post_readv and rdma_post_writev post one opcode
// each and carry none of the others' fields (immediate data, atomic
// operands): PostSendv, PostReadv, PostWritev and their Raw forms stop at a
// WR of another opcode, before posting it, with an error naming the WR and
// both opcodes; the WRs before it are posted, as with any failure part-way.
// The chain keeps that WR and the rest, as they were: PostSend then posts
// each with its own opcode. Those of the method's own opcode (SetInline's
// send among them) go through.
func TestRDMAPostvRefusesOtherOpcodes(t *testing.T) {
	const raddr, rkey = 0x200000, 0x5678
	sig := hand.Signaled
	setters := []struct {
		name string
		op   verbs.WROpcode
		set  func(v hand.SendWRs, i int)
	}{
		{"send", verbs.WROpSend, func(v hand.SendWRs, i int) { v.SetSend(0, uint64(i), sig, sge(i)) }},
		{"inline", verbs.WROpSend, func(v hand.SendWRs, i int) { v.SetInline(0, uint64(i), sig, []byte("inline")) }},
		{"send_imm", verbs.WROpSendWithImm, func(v hand.SendWRs, i int) { v.SetSendImm(0, uint64(i), sig, 7, sge(i)) }},
		{"write", verbs.WROpRDMAWrite, func(v hand.SendWRs, i int) { v.SetWrite(0, uint64(i), sig, sge(i), raddr, rkey) }},
		{"write_imm", verbs.WROpRDMAWriteWithImm, func(v hand.SendWRs, i int) {
			v.SetWriteImm(0, uint64(i), sig, 7, sge(i), raddr, rkey)
		}},
		{"read", verbs.WROpRDMARead, func(v hand.SendWRs, i int) { v.SetRead(0, uint64(i), sig, sge(i), raddr, rkey) }},
		{"cas", verbs.WROpAtomicCmpAndSwp, func(v hand.SendWRs, i int) {
			v.SetCompareSwap(0, uint64(i), sig, sge(i), raddr, rkey, 1, 2)
		}},
		{"faa", verbs.WROpAtomicFetchAndAdd, func(v hand.SendWRs, i int) {
			v.SetFetchAdd(0, uint64(i), sig, sge(i), raddr, rkey, 1)
		}},
	}
	// The names the error must give, written out here rather than taken
	// from the package's table.
	names := map[verbs.WROpcode]string{
		verbs.WROpSend: "IBV_WR_SEND", verbs.WROpSendWithImm: "IBV_WR_SEND_WITH_IMM",
		verbs.WROpRDMAWrite: "IBV_WR_RDMA_WRITE", verbs.WROpRDMAWriteWithImm: "IBV_WR_RDMA_WRITE_WITH_IMM",
		verbs.WROpRDMARead: "IBV_WR_RDMA_READ", verbs.WROpAtomicCmpAndSwp: "IBV_WR_ATOMIC_CMP_AND_SWP",
		verbs.WROpAtomicFetchAndAdd: "IBV_WR_ATOMIC_FETCH_AND_ADD",
	}
	type poster func(c *hand.SendChain, id *rdmacm.CMID) error
	methods := []struct {
		name, op string
		want     verbs.WROpcode
		own      int // index in setters of a WR the method posts
		post     poster
	}{
		{"PostSendvRaw", "rdma_post_sendv", verbs.WROpSend, 0, (*hand.SendChain).PostSendvRaw},
		{"PostReadvRaw", "rdma_post_readv", verbs.WROpRDMARead, 5, (*hand.SendChain).PostReadvRaw},
		{"PostWritevRaw", "rdma_post_writev", verbs.WROpRDMAWrite, 3, (*hand.SendChain).PostWritevRaw},
		{"PostSendv", "rdma_post_sendv", verbs.WROpSend, 0, func(c *hand.SendChain, id *rdmacm.CMID) error {
			return c.PostSendv(hand.ConnOnID(id))
		}},
		{"PostReadv", "rdma_post_readv", verbs.WROpRDMARead, 5, func(c *hand.SendChain, id *rdmacm.CMID) error {
			return c.PostReadv(hand.ConnOnID(id))
		}},
		{"PostWritev", "rdma_post_writev", verbs.WROpRDMAWrite, 3, func(c *hand.SendChain, id *rdmacm.CMID) error {
			return c.PostWritev(hand.ConnOnID(id))
		}},
	}
	const n = 8
	for _, m := range methods {
		require.Equal(t, m.want, setters[m.own].op, "%s's own setter", m.name)
		for _, s := range setters {
			for _, k := range []int{0, 5, n - 1} {
				t.Run(fmt.Sprintf("%s/%s@%d", m.name, s.name, k), func(t *testing.T) {
					r := newRig(t, rigOpts{})
					id := r.cmID(t, false)
					c, err := hand.NewSendChain(n, 1, 16)
					require.NoError(t, err)
					defer c.Close()
					for i := 0; i < n; i++ {
						if i == k {
							s.set(c.Reserve(1), i)
						} else {
							setters[m.own].set(c.Reserve(1), i)
						}
					}
					before := r.fqp.SendStats()
					err = m.post(c, id)
					if s.op == m.want {
						require.NoError(t, err)
						for i := 0; i < n; i++ {
							require.Equal(t, m.want, wqe(r.fqp.SendWQE(before.Head+uint32(i))).opcode(), "WR %d", i)
						}
						requireIDs(t, drain(t, r, n), 0, n)
						return
					}
					var oe *hand.OpcodeError
					require.ErrorAs(t, err, &oe)
					require.Equal(t, hand.OpcodeError{Op: m.op, Index: k, Posted: k, Opcode: s.op, Want: m.want}, *oe)
					require.ErrorIs(t, err, syscall.EINVAL)
					require.Equal(t, fmt.Sprintf("%s: WR %d is %s, but %s posts %s only (%d WRs before it posted; PostSend posts each WR's own opcode)",
						m.op, k, names[s.op], m.op, names[m.want], k), err.Error())
					after := r.fqp.SendStats()
					require.Equal(t, before.Posted+uint64(k), after.Posted, "the WRs before it posted")
					require.Equal(t, before.Failed, after.Failed, "WR %d never reached the provider", k)
					require.Equal(t, n-k, c.Len(), "WR %d and the ones after it stay pending", k)

					// What the caller meant goes through PostSend on the
					// same QP, each WR with its own opcode.
					require.NoError(t, c.PostSendRaw(r.qp))
					for i := 0; i < n; i++ {
						op := m.want
						if i == k {
							op = s.op
						}
						require.Equal(t, op, wqe(r.fqp.SendWQE(before.Head+uint32(i))).opcode(), "WR %d", i)
					}
					requireIDs(t, drain(t, r, n), 0, n)
				})
			}
		}
	}
}

// After a partial post, an OpcodeError's Index still counts from the
// chain's first WR, as a PostError's does; and an opcode enum ibv_wr_opcode
// does not name is printed as its number.
func TestOpcodeErrorIndexAndName(t *testing.T) {
	r := newRig(t, rigOpts{})
	id := r.cmID(t, false)
	c, err := hand.NewSendChain(8, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 4; i++ {
		c.Reserve(1).SetSend(0, uint64(i), hand.Signaled, sge(i))
	}
	r.fqp.FailSendCall(2, 0, syscall.EAGAIN) // the third call fails: WRs 0 and 1 go
	var pe *hand.PostError
	require.ErrorAs(t, c.PostSendvRaw(id), &pe)
	require.Equal(t, 2, pe.Index)
	v := c.Reserve(2)
	v.SetSend(0, 4, hand.Signaled, sge(4))
	v.SetSend(1, 5, hand.Signaled, sge(5))
	v.WR(1).Opcode = 12 // between IBV_WR_DRIVER1 and IBV_WR_FLUSH: no name
	before := r.fqp.SendStats()
	err = c.PostSendvRaw(id)
	var oe *hand.OpcodeError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 5, oe.Index, "WR 5 of the chain, the fourth pending")
	require.Equal(t, 3, oe.Posted, "WRs 2 to 4 went before it")
	require.Equal(t, "rdma_post_sendv: WR 5 is opcode 12, but rdma_post_sendv posts IBV_WR_SEND only (3 WRs before it posted; PostSend posts each WR's own opcode)", err.Error())
	require.Equal(t, before.Posted+3, r.fqp.SendStats().Posted, "WRs 2 to 4 posted")
	require.Equal(t, 1, c.Len(), "WR 5 stays pending")
	v.WR(1).Opcode = verbs.WROpSend
	require.NoError(t, c.PostSendvRaw(id))
	requireIDs(t, drain(t, r, 6), 0, 6)
}

func TestSendChainEveryLength(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewSendChain(1024, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	next := 0
	for n := 1; n <= 1024; n++ {
		for i := 0; i < n; i++ {
			c.Reserve(1).SetWrite(0, uint64(next+i), hand.Signaled, sge(i), 0x200000, 1)
		}
		require.NoError(t, c.PostSendRaw(r.qp))
		cs := drain(t, r, n)
		requireIDs(t, cs, next, n)
		next += n
	}
	require.Equal(t, uint64(1024), r.fqp.SendStats().Doorbells, "one doorbell per post call")
}

// staged is the inline staging an SGE that SetInline filled points to. The
// address is read back as a pointer from memory (a uintptr-to-Pointer
// conversion would trip go vet). Not inlined: Go 1.26.8's compiler panics
// (disjointTypes, while lowering a memmove) on the inlined form in
// TestSetInlineIndexOutsideView.
//
//go:noinline
func staged(s *verbs.SGE, n int) []byte {
	addr := uintptr(s.Addr)
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), n)
}

// SetInline at every length its chain admits, on views that start past WR 0
// (the view finds its staging from its capacity), for staging sizes around
// the 16-byte fast path: the staged bytes and the SGE are right, nothing
// beyond the payload or in another WR's staging changes, and the provider
// sends the bytes.
func TestSetInlineEveryLength(t *testing.T) {
	r := newRig(t, rigOpts{})
	for _, inlCap := range []int{0, 1, 7, 8, 15, 16, 17, 24, 40} {
		c, err := hand.NewSendChain(4, 1, inlCap)
		require.NoError(t, err)
		fillAll := func(b byte) {
			v := c.Reserve(4)
			for k := range 4 {
				v.SetInline(k, 0, 0, bytes.Repeat([]byte{b}, inlCap))
			}
			c.Reset()
		}
		fillAll(0xee)
		base := c.WR(0).SGList.Addr // WR 0's staging, the start of the chain's
		for n := 0; n <= inlCap; n++ {
			fillAll(0xee)
			data := make([]byte, n)
			for j := range data {
				data[j] = byte(n*7 + j + 1)
			}
			c.Reserve(1).SetSend(0, 99, hand.Signaled, sge(0))
			v := c.Reserve(2) // WRs 1 and 2
			v.SetInline(1, uint64(n), hand.Signaled, data)
			w := c.WR(2)
			require.Equal(t, verbs.WROpSend, w.Opcode)
			require.Equal(t, hand.Signaled|verbs.SendInline, w.SendFlags)
			require.Equal(t, int32(1), w.NumSGE)
			require.Zero(t, w.ImmData)
			require.Equal(t, uint64(n), w.WRID)
			require.Equal(t, base+uint64(2*inlCap), w.SGList.Addr, "cap %d len %d: WR 2's staging", inlCap, n)
			require.Equal(t, uint32(n), w.SGList.Length)
			require.Zero(t, w.SGList.LKey)
			all := staged(&verbs.SGE{Addr: base}, 4*inlCap)
			want := bytes.Repeat([]byte{0xee}, 4*inlCap)
			copy(want[2*inlCap:], data)
			require.Equal(t, want, all, "cap %d len %d: only WR 2's first %d bytes change", inlCap, n, n)
			clear(data) // data may be reused at once
			require.Equal(t, want, all)

			if n <= 40 { // what the fake's 64-byte WQE holds after its 16-byte header and length
				v.SetSend(0, 98, hand.Signaled, sge(1))
				head := r.fqp.SendStats().Head
				require.NoError(t, c.PostSendRaw(r.qp))
				q := wqe(r.fqp.SendWQE(head + 2))
				require.Equal(t, uint32(n)|0x80000000, q.u32(16))
				require.Equal(t, want[2*inlCap:2*inlCap+n], q[20:20+n])
				drain(t, r, 3)
			}
			c.Reset()
		}
		require.Panics(t, func() { c.Reserve(1).SetInline(0, 1, 0, make([]byte, inlCap+1)) }, "cap %d", inlCap)
		c.Reset()
		c.Close()
	}
}

// An index outside the view panics before anything is staged.
func TestSetInlineIndexOutsideView(t *testing.T) {
	c, err := hand.NewSendChain(4, 1, 16)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(4)
	for k := range 4 {
		v.SetInline(k, 0, 0, bytes.Repeat([]byte{0xee}, 16))
	}
	c.Reset()
	before := bytes.Clone(staged(c.WR(0).SGList, 64))
	v = c.Reserve(1)
	data := []byte("0123456789abcdef")
	require.Panics(t, func() { v.SetInline(1, 0, 0, data) })
	require.Panics(t, func() { v.SetInline(-1, 0, 0, data) })
	v = c.Reserve(3)
	require.Panics(t, func() { v.SetInline(3, 0, 0, data) }, "past the chain's last WR")
	require.Equal(t, before, staged(c.WR(0).SGList, 64))

	_, err = hand.NewSendChain(1, 1, 1<<20+1)
	require.ErrorIs(t, err, syscall.EINVAL, "inline staging over 1 MiB")
}

// Sizes whose products would overflow (capacity times scatter entries)
// are EINVAL, not a panic or a short allocation.
func TestChainSizeBounds(t *testing.T) {
	for _, tc := range []struct{ capacity, maxSGE int }{
		{0, 1}, {1, 0}, {1<<24 + 1, 1}, {1, 1<<16 + 1}, {1 << 40, 1 << 40},
	} {
		_, err := hand.NewRecvChain(tc.capacity, tc.maxSGE)
		require.ErrorIs(t, err, syscall.EINVAL, "recv %+v", tc)
		_, err = hand.NewSendChain(tc.capacity, tc.maxSGE, 0)
		require.ErrorIs(t, err, syscall.EINVAL, "send %+v", tc)
	}
}

// A WR never reaches the provider with a nil or closed AH: SetUD and
// SetUDImm panic before they write the WR.
func TestSetUDDeadAH(t *testing.T) {
	r := newRig(t, rigOpts{typ: fakeprov.UD})
	c, err := hand.NewSendChain(4, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(1)
	v.SetUD(0, 7, sig, sge(0), r.hah, 0x42, 0x1111)
	want := *v.WR(0)
	require.Equal(t, r.ah, want.WR.UD().AH)

	closed := hand.AHOn(r.ah)
	closed.Closed()
	for name, ah := range map[string]*hand.AH{"nil": nil, "closed": closed} {
		require.Panics(t, func() { v.SetUD(0, 8, sig, sge(1), ah, 0x43, 0x2222) }, "SetUD to a %s AH", name)
		require.Panics(t, func() { v.SetUDImm(0, 8, sig, 3, sge(1), ah, 0x43, 0x2222) }, "SetUDImm to a %s AH", name)
		require.Equal(t, want, *v.WR(0), "SetUD to a %s AH changed the WR", name)
	}
}
