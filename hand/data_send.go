package hand

// #include "hand.h"
import "C"

import (
	"errors"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// SendChain is a reusable chain of send work requests (struct ibv_send_wr),
// their scatter lists and an inline-data staging area in C memory, posted
// with one cgo call by PostSend (or PostSendv, PostReadv, PostWritev, each
// for a chain of its own opcode only).
//
// Reserve hands out the next WRs to fill, one Set method per opcode; a post
// call posts every pending WR and, when all of them went through, empties the
// chain for the next round. The WRs are prelinked once (next and sg_list):
// the chain cuts the list after the last pending WR for the duration of a
// call.
type SendChain struct {
	chain[verbs.SendWR]
	// inlEnd is the end of the inline staging (C memory, inlCap bytes per
	// WR): the staging of WR k starts (len(wr)-k)*inlCap bytes before it, so
	// that a view finds it from its own capacity (see Reserve).
	inlEnd unsafe.Pointer
	inlCap int
	// inl16 is 16 when inlCap >= 16 (SetInline's fixed 16-byte move fits),
	// else -1: derived from inlCap, but kept so that SetInline tests one
	// equality, which keeps it within the inliner's budget.
	inl16 int
	opErr OpcodeError // what a refused rdma_post_*v returns, reused
}

// maxChainWRs and maxChainSGE bound a chain's capacity and scatter entries
// per WR, far above any device's queue depth (max_qp_wr) and max_sge, so
// that the sizes NewRecvChain and NewSendChain compute cannot overflow.
const (
	maxChainWRs = 1 << 24
	maxChainSGE = 1 << 16
)

// chainSizeOK reports whether a chain of capacity WRs of maxSGE entries
// each is within those bounds.
func chainSizeOK(capacity, maxSGE int) bool {
	return capacity > 0 && capacity <= maxChainWRs && maxSGE > 0 && maxSGE <= maxChainSGE
}

// maxInlineCap bounds NewSendChain's inlineCap (SetInline slices the staging
// as a [maxInlineCap]byte); providers' max_inline_data is far smaller.
const maxInlineCap = 1 << 20

// NewSendChain allocates a chain of up to capacity WRs (at most 2^24) of
// up to maxSGE scatter entries each (at most 2^16), with inlineCap bytes of
// inline staging per WR (0 when SetInline is not used, at most 1 MiB), in
// C memory. Close releases it.
func NewSendChain(capacity, maxSGE, inlineCap int) (*SendChain, error) {
	if !chainSizeOK(capacity, maxSGE) || inlineCap < 0 || inlineCap > maxInlineCap {
		return nil, syscall.EINVAL
	}
	wrSize := uintptr(capacity) * unsafe.Sizeof(verbs.SendWR{})
	sgeSize := uintptr(capacity*maxSGE) * unsafe.Sizeof(verbs.SGE{})
	badSize := unsafe.Sizeof(uintptr(0))
	mem, err := cmalloc(wrSize + sgeSize + badSize + uintptr(capacity*inlineCap))
	if err != nil {
		return nil, err
	}
	c := &SendChain{
		chain: chain[verbs.SendWR]{
			wr:     unsafe.Slice((*verbs.SendWR)(mem), capacity),
			bad:    (**verbs.SendWR)(unsafe.Add(mem, wrSize+sgeSize)),
			mem:    mem,
			maxSGE: maxSGE,
		},
		inlEnd: unsafe.Add(mem, wrSize+sgeSize+badSize+uintptr(capacity*inlineCap)),
		inlCap: inlineCap,
		inl16:  -1,
	}
	if inlineCap >= 16 {
		c.inl16 = 16
	}
	sge := unsafe.Slice((*verbs.SGE)(unsafe.Add(mem, wrSize)), capacity*maxSGE)
	for i := range c.wr {
		if i+1 < capacity {
			c.wr[i].Next = &c.wr[i+1]
		}
		c.wr[i].SGList = &sge[i*maxSGE]
	}
	return c, nil
}

// Close releases the chain's C memory. Neither the chain nor a view Reserve
// returned may be used afterwards. Closing again does nothing. Close
// returns nil, or an error matching ErrConcurrentUse, having released
// nothing, when another goroutine is in a call of the chain.
func (c *SendChain) Close() error {
	if err := c.close(usedSendClose); err != nil {
		return err
	}
	c.inlEnd, c.inlCap, c.inl16, c.opErr = nil, 0, 0, OpcodeError{}
	c.use.exit()
	return nil
}

// Reserve appends k WRs to the pending ones and returns them for filling:
// every one of them must be filled (one of the Set methods) before the next
// post, which posts them whatever they hold. It panics when fewer than k WRs
// are free, so no WR is ever dropped unnoticed. It does not allocate.
func (c *SendChain) Reserve(k int) SendWRs {
	// The view's capacity runs to the end of the chain: it tells SetInline
	// where the view starts without one more field, which would take the
	// view over four words, where Go stops keeping a struct in registers
	// (that cost every post_send case about 18 ns a call).
	v := SendWRs{wr: c.wr[c.n : c.n+k], c: c}
	c.n += k
	return v
}

// WR returns WR i of the chain. Its Next and SGList belong to the chain: do
// not change them.
func (c *SendChain) WR(i int) *verbs.SendWR { return &c.wr[i] }

// SendWRs is a view of WRs a SendChain reserved, to fill in place. It is a
// small value meant to live in registers: filling through it costs what the
// same stores cost in C. It is valid until the chain's next post or Reset.
//
// Each Set method fills WR i of the view for one opcode with one scatter
// entry (SetSGL replaces it with a longer list), is inlined (SetInline too)
// and does not allocate. flags are IBV_SEND_* flags; SendSignaled asks for a
// completion. Immediate data is given in host order and goes out in network
// order; imm_data of the opcodes without one is zeroed. Fields the opcode does
// not use may keep values from an earlier round: providers ignore them.
type SendWRs struct {
	wr []verbs.SendWR
	c  *SendChain
}

// Len is the number of WRs in the view.
func (v SendWRs) Len() int { return len(v.wr) }

// WR returns WR i of the view, for direct use of the generated layout. Its
// Next and SGList belong to the chain: do not change them.
func (v SendWRs) WR(i int) *verbs.SendWR { return &v.wr[i] }

// fill sets what every opcode sets.
func fill(w *verbs.SendWR, wrID uint64, op verbs.WROpcode, flags verbs.SendFlags, imm verbs.Be32, sge verbs.SGE) *verbs.SendWR {
	w.WRID = wrID
	w.NumSGE = 1
	w.Opcode = op
	w.SendFlags = flags
	w.ImmData = imm
	*w.SGList = sge
	return w
}

// SetSend makes WR i a send (IBV_WR_SEND).
func (v SendWRs) SetSend(i int, wrID uint64, flags SendFlags, sge SGE) {
	fill(&v.wr[i], wrID, verbs.WROpSend, flags, 0, sge)
}

// SetSendImm makes WR i a send with immediate data (IBV_WR_SEND_WITH_IMM).
func (v SendWRs) SetSendImm(i int, wrID uint64, flags SendFlags, imm uint32, sge SGE) {
	fill(&v.wr[i], wrID, verbs.WROpSendWithImm, flags, be32(imm), sge)
}

// SetWrite makes WR i an RDMA write of sge to remoteAddr under rkey (IBV_WR_RDMA_WRITE).
func (v SendWRs) SetWrite(i int, wrID uint64, flags SendFlags, sge SGE, remoteAddr uint64, rkey uint32) {
	r := fill(&v.wr[i], wrID, verbs.WROpRDMAWrite, flags, 0, sge).WR.RDMA()
	r.RemoteAddr = remoteAddr
	r.RKey = rkey
}

// SetWriteImm makes WR i an RDMA write with immediate data (IBV_WR_RDMA_WRITE_WITH_IMM).
func (v SendWRs) SetWriteImm(i int, wrID uint64, flags SendFlags, imm uint32, sge SGE, remoteAddr uint64, rkey uint32) {
	r := fill(&v.wr[i], wrID, verbs.WROpRDMAWriteWithImm, flags, be32(imm), sge).WR.RDMA()
	r.RemoteAddr = remoteAddr
	r.RKey = rkey
}

// SetRead makes WR i an RDMA read from remoteAddr under rkey into sge (IBV_WR_RDMA_READ).
func (v SendWRs) SetRead(i int, wrID uint64, flags SendFlags, sge SGE, remoteAddr uint64, rkey uint32) {
	r := fill(&v.wr[i], wrID, verbs.WROpRDMARead, flags, 0, sge).WR.RDMA()
	r.RemoteAddr = remoteAddr
	r.RKey = rkey
}

// SetWriteTo makes WR i an RDMA write of sge to the start of remote
// (IBV_WR_RDMA_WRITE). It panics when sge is longer than remote: the write
// would reach past what the peer advertised, into whatever else its MR
// holds, and the peer's device checks only the MR's bounds. Lengths that
// come from the peer go through remote.Slice first, which returns an error
// instead; the panic is then a bug of the program's, like an index out of
// range. It is checked here, once, and not at post time: a scatter list
// SetSGL puts in afterwards is the caller's to keep within remote.
func (v SendWRs) SetWriteTo(i int, wrID uint64, flags SendFlags, sge SGE, remote RemoteBuffer) {
	if uint64(sge.Length) > remote.length {
		panic(errRemoteShort) // a value made once: nothing formatted on the data path
	}
	r := fill(&v.wr[i], wrID, verbs.WROpRDMAWrite, flags, 0, sge).WR.RDMA()
	r.RemoteAddr = remote.addr
	r.RKey = remote.rkey
}

// SetWriteImmTo is SetWriteTo with immediate data
// (IBV_WR_RDMA_WRITE_WITH_IMM), and the same check.
func (v SendWRs) SetWriteImmTo(i int, wrID uint64, flags SendFlags, imm uint32, sge SGE, remote RemoteBuffer) {
	if uint64(sge.Length) > remote.length {
		panic(errRemoteShort)
	}
	r := fill(&v.wr[i], wrID, verbs.WROpRDMAWriteWithImm, flags, be32(imm), sge).WR.RDMA()
	r.RemoteAddr = remote.addr
	r.RKey = remote.rkey
}

// SetReadFrom makes WR i an RDMA read from the start of remote into sge
// (IBV_WR_RDMA_READ). It panics when sge is longer than remote, as
// SetWriteTo does: the read would fetch the peer's bytes beyond what it
// advertised.
func (v SendWRs) SetReadFrom(i int, wrID uint64, flags SendFlags, sge SGE, remote RemoteBuffer) {
	if uint64(sge.Length) > remote.length {
		panic(errRemoteShort)
	}
	r := fill(&v.wr[i], wrID, verbs.WROpRDMARead, flags, 0, sge).WR.RDMA()
	r.RemoteAddr = remote.addr
	r.RKey = remote.rkey
}

var errRemoteShort = errors.New("goverbs: SendWRs: the scatter entry is longer than the remote buffer (check lengths from a peer with RemoteBuffer.Slice)")

// SetCompareSwap makes WR i an 8-byte atomic compare-and-swap at remoteAddr
// (IBV_WR_ATOMIC_CMP_AND_SWP); the old value lands in sge (length 8).
func (v SendWRs) SetCompareSwap(i int, wrID uint64, flags SendFlags, sge SGE, remoteAddr uint64, rkey uint32, compare, swap uint64) {
	a := &fill(&v.wr[i], wrID, verbs.WROpAtomicCmpAndSwp, flags, 0, sge).WR.Atomic
	a.RemoteAddr = remoteAddr
	a.RKey = rkey
	a.CompareAdd = compare
	a.Swap = swap
}

// SetFetchAdd makes WR i an 8-byte atomic fetch-and-add of add at remoteAddr
// (IBV_WR_ATOMIC_FETCH_AND_ADD); the old value lands in sge (length 8).
func (v SendWRs) SetFetchAdd(i int, wrID uint64, flags SendFlags, sge SGE, remoteAddr uint64, rkey uint32, add uint64) {
	a := &fill(&v.wr[i], wrID, verbs.WROpAtomicFetchAndAdd, flags, 0, sge).WR.Atomic
	a.RemoteAddr = remoteAddr
	a.RKey = rkey
	a.CompareAdd = add
}

// SetInline makes WR i a send whose payload is copied now into the chain's
// inline staging (IBV_WR_SEND with IBV_SEND_INLINE): data may be Go memory
// and may be reused as soon as SetInline returns. It panics when data is
// longer than the chain's inlineCap; the QP's max_inline_data limits it too
// (the provider rejects longer data at post time). It is inlined and does not
// allocate. A 16-byte payload is moved with one 16-byte load and store, as
// C's memcpy of a constant 16; other lengths go through copy (a runtime
// memmove call, about 1.5 ns more per WR): the inlining budget has room for
// one fixed size only.
func (v SendWRs) SetInline(i int, wrID uint64, flags SendFlags, data []byte) {
	// Every node counts: this body sits at the inliner's budget of 80
	// (go build -gcflags=-m=2). fill costs more than the stores it makes.
	// i is checked (by v.wr[i]) before dst is written through.
	w := &v.wr[i]
	dst := unsafe.Add(v.c.inlEnd, (i-cap(v.wr))*v.c.inlCap)
	if len(data) == v.c.inl16 {
		*(*[16]byte)(dst) = [16]byte(data)
	} else {
		copy((*[maxInlineCap]byte)(dst)[:len(data):v.c.inlCap], data)
	}
	w.WRID = wrID
	w.NumSGE = 1
	w.Opcode = verbs.WROpSend
	w.SendFlags = flags | verbs.SendInline
	w.ImmData = 0
	*w.SGList = verbs.SGE{Addr: uint64(uintptr(dst)), Length: uint32(len(data))}
}

// SetUD makes WR i a send on a UD QP to remoteQPN through ah with qkey.
// The WR holds ah's C address handle until the send completes: do not
// Close ah before. SetUD panics when ah is nil or closed, leaving WR i as
// it was, rather than hand the provider an address handle it would
// dereference. It does not allocate.
func (v SendWRs) SetUD(i int, wrID uint64, flags SendFlags, sge SGE, ah *AH, remoteQPN, qkey uint32) {
	p := ah.ptr()
	u := fill(&v.wr[i], wrID, verbs.WROpSend, flags, 0, sge).WR.UD()
	u.AH = p
	u.RemoteQPN = remoteQPN
	u.RemoteQKey = qkey
}

// SetUDImm is SetUD with immediate data (IBV_WR_SEND_WITH_IMM).
func (v SendWRs) SetUDImm(i int, wrID uint64, flags SendFlags, imm uint32, sge SGE, ah *AH, remoteQPN, qkey uint32) {
	p := ah.ptr()
	u := fill(&v.wr[i], wrID, verbs.WROpSendWithImm, flags, be32(imm), sge).WR.UD()
	u.AH = p
	u.RemoteQPN = remoteQPN
	u.RemoteQKey = qkey
}

// SetUDRaw is SetUD through a struct ibv_ah of the generated package: ah
// must be C memory (from ibv_create_ah) and outlive the post.
func (v SendWRs) SetUDRaw(i int, wrID uint64, flags verbs.SendFlags, sge verbs.SGE, ah *verbs.AH, remoteQPN, qkey uint32) {
	u := fill(&v.wr[i], wrID, verbs.WROpSend, flags, 0, sge).WR.UD()
	u.AH = ah
	u.RemoteQPN = remoteQPN
	u.RemoteQKey = qkey
}

// SetUDImmRaw is SetUDImm through a struct ibv_ah of the generated
// package, like SetUDRaw.
func (v SendWRs) SetUDImmRaw(i int, wrID uint64, flags verbs.SendFlags, imm uint32, sge verbs.SGE, ah *verbs.AH, remoteQPN, qkey uint32) {
	u := fill(&v.wr[i], wrID, verbs.WROpSendWithImm, flags, be32(imm), sge).WR.UD()
	u.AH = ah
	u.RemoteQPN = remoteQPN
	u.RemoteQKey = qkey
}

// SetSGL replaces the scatter/gather list of WR i, filled by a Set method,
// with sgl, copied into the chain. It panics when sgl is longer than the
// chain's maxSGE. It does not allocate.
func (v SendWRs) SetSGL(i int, sgl []SGE) {
	w := &v.wr[i]
	copy(unsafe.Slice(w.SGList, v.c.maxSGE)[:len(sgl)], sgl)
	w.NumSGE = int32(len(sgl))
}

// PostSend posts the pending WRs to qp with one ibv_post_send call; see
// PostSendRaw for what a failure leaves. It returns ErrClosed once qp is
// closed. It does not allocate.
func (c *SendChain) PostSend(qp *QP) error {
	if err := qp.use(); err != nil {
		return err
	}
	err := c.postSend(qp.raw, usedPostSend)
	qp.done() // not deferred: see Poller.poll
	return err
}

// PostSendv is PostSendvRaw on conn's rdma_cm id: every pending WR must be
// a send (SetSend, SetInline); the post stops at the first that is not,
// with an *OpcodeError. PostSend(conn.QP()) posts a chain of any opcodes. It returns ErrClosed once conn is closed.
func (c *SendChain) PostSendv(conn *Conn) error {
	return c.connPost(conn, C.GOVERBS_CM_SENDV, verbs.WROpSend, "rdma_post_sendv", usedPostSendv)
}

// PostReadv is PostReadvRaw on conn's rdma_cm id: every pending WR must be
// an RDMA read (SetRead); the post stops at the first that is not, with an
// *OpcodeError. PostSend(conn.QP()) posts a chain of any opcodes. It returns ErrClosed once conn is closed.
func (c *SendChain) PostReadv(conn *Conn) error {
	return c.connPost(conn, C.GOVERBS_CM_READV, verbs.WROpRDMARead, "rdma_post_readv", usedPostReadv)
}

// PostWritev is PostWritevRaw on conn's rdma_cm id: every pending WR must
// be an RDMA write (SetWrite); the post stops at the first that is not,
// with an *OpcodeError. PostSend(conn.QP()) posts a chain of any opcodes. It returns ErrClosed once conn is closed.
func (c *SendChain) PostWritev(conn *Conn) error {
	return c.connPost(conn, C.GOVERBS_CM_WRITEV, verbs.WROpRDMAWrite, "rdma_post_writev", usedPostWritev)
}

func (c *SendChain) connPost(conn *Conn, kind C.int, want verbs.WROpcode, op string, used *usedError) error {
	if err := conn.use(); err != nil {
		return err
	}
	err := c.cmPost(conn.id, kind, want, op, used)
	conn.done() // not deferred: see Poller.poll
	return err
}

// PostSendRaw posts the pending WRs to qp with one ibv_post_send call. On
// success the chain is empty. On failure it returns a *PostError (see
// PostError for what was posted and what is left). It does not allocate.
//
// qp must be C memory (from ibv_create_qp or rdma_cm), like the chain and
// the AHs in it: the call passes qp and the chain to C as plain addresses,
// so that cgo does not check each pointer for Go pointers, which would cost
// as much as the crossing.
//
// A chain is for one goroutine at a time: a post that finds another
// goroutine in a call of the chain posts nothing and returns an error
// matching ErrConcurrentUse (so do all the post methods and Close).
func (c *SendChain) PostSendRaw(qp *verbs.QP) error { return c.postSend(qp, usedPostSendRaw) }

// postSend is PostSendRaw, returning used when the chain is in use.
func (c *SendChain) postSend(qp *verbs.QP, used *usedError) error {
	if !c.use.enter() {
		return used
	}
	if c.head == c.n {
		c.use.exit()
		return nil
	}
	rc := int32(C.goverbs_post_send(cptr(unsafe.Pointer(qp)), cptr(unsafe.Pointer(&c.wr[c.head])),
		cptr(unsafe.Pointer(&c.wr[c.n-1])), cptr(unsafe.Pointer(c.bad))))
	if rc == 0 {
		c.head, c.n = 0, 0
		c.use.exit()
		return nil
	}
	err := c.failed("ibv_post_send", errnoOf(rc))
	c.use.exit()
	return err
}

// PostSendvRaw does for each pending WR what rdma_post_sendv does: it
// posts a send (IBV_WR_SEND) of its own with ibv_post_send to id's QP, with
// the WR's wr_id (the context that comes back as the completion's wr_id),
// scatter list and send_flags.
//
// Every pending WR must be a send (SetSend, SetInline). The post stops at
// the first WR of another opcode, before posting it, with an *OpcodeError
// naming it (the WRs before it were posted, as with any failure part-way):
// rdma_post_sendv has no opcode argument and no room for what the others
// carry (immediate data, a remote address, atomic operands), so posting it
// would silently send something else. PostSendRaw on id's QP posts each WR with its own opcode, the whole
// chain in one ibv_post_send; rdma_post_sendv adds nothing to that but its
// one WR a call.
//
// Unlike rdma_post_sendv it keeps the bad_wr the provider returns, so that
// a failure naming no WR comes back as a *PostError with Unknown set, for
// the one WR in doubt. One cgo call for the chain, stopping at the first
// failure with a *PostError. It does not allocate.
func (c *SendChain) PostSendvRaw(id *rdmacm.CMID) error {
	return c.cmPost(id, C.GOVERBS_CM_SENDV, verbs.WROpSend, "rdma_post_sendv", usedPostSendvRaw)
}

// PostReadvRaw is PostSendvRaw doing what rdma_post_readv does: each WR
// reads from its remote address and rkey into its scatter list. Every
// pending WR must be an RDMA read (SetRead): the post stops at the first
// that is not, with an *OpcodeError.
func (c *SendChain) PostReadvRaw(id *rdmacm.CMID) error {
	return c.cmPost(id, C.GOVERBS_CM_READV, verbs.WROpRDMARead, "rdma_post_readv", usedPostReadvRaw)
}

// PostWritevRaw is PostSendvRaw doing what rdma_post_writev does: each WR
// writes its scatter list to its remote address and rkey. Every pending WR
// must be an RDMA write (SetWrite; a write with immediate data, SetWriteImm,
// is refused too, as rdma_post_writev carries none): the post stops at the
// first that is not, with an *OpcodeError.
func (c *SendChain) PostWritevRaw(id *rdmacm.CMID) error {
	return c.cmPost(id, C.GOVERBS_CM_WRITEV, verbs.WROpRDMAWrite, "rdma_post_writev", usedPostWritevRaw)
}

// cmPost posts the pending WRs with goverbs_cm_post_send, which gives each
// the opcode of kind (want) and stops at the first that carries another;
// it returns used when the chain is in use.
func (c *SendChain) cmPost(id *rdmacm.CMID, kind C.int, want verbs.WROpcode, op string, used *usedError) error {
	if !c.use.enter() {
		return used
	}
	if c.head == c.n {
		c.use.exit()
		return nil
	}
	r := C.goverbs_cm_post_send(cptr(unsafe.Pointer(id)), kind, cptr(unsafe.Pointer(&c.wr[c.head])),
		C.int(c.n-c.head))
	if r == 0 {
		c.head, c.n = 0, 0
		c.use.exit()
		return nil
	}
	var err error
	if uint32(r) == C.GOVERBS_CM_OPCODE {
		err = c.refuse(op, int(r>>32), want)
	} else {
		err = c.stopped(op, r)
	}
	c.use.exit()
	return err
}

// refuse records that the call stopped at its WR k, whose opcode op cannot
// post, after posting the k before it. Out of line, to keep cmPost small.
//
//go:noinline
func (c *SendChain) refuse(op string, k int, want verbs.WROpcode) error {
	c.head += k
	c.opErr = OpcodeError{Op: op, Index: c.head, Posted: k, Opcode: c.wr[c.head].Opcode, Want: want}
	return &c.opErr
}
