package hand

// #include "hand.h"
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// SendChain is a reusable chain of send work requests (struct ibv_send_wr),
// their scatter lists and an inline-data staging area in C memory, posted
// with one cgo call by PostSend (or PostSendv, PostReadv, PostWritev).
//
// The Add methods fill the next WR for one opcode each; a post call posts
// every pending WR and, when all of them went through, empties the chain. A
// WR's fields that its opcode does not use may hold values from an earlier
// round: providers ignore them.
type SendChain struct {
	wr     []verbs.SendWR // C memory
	sge    []verbs.SGE    // C memory: maxSGE per WR
	bad    **verbs.SendWR // C memory: the bad_wr slot
	inl    []byte         // C memory: inlineCap bytes per WR
	mem    unsafe.Pointer
	maxSGE int
	inlCap int
	head   int
	n      int
	err    PostError
}

// NewSendChain allocates a chain of up to capacity WRs of up to maxSGE
// scatter entries each, with inlineCap bytes of inline staging per WR (0 when
// AddInline is not used), in C memory. Free releases it.
func NewSendChain(capacity, maxSGE, inlineCap int) (*SendChain, error) {
	if capacity <= 0 || maxSGE <= 0 || inlineCap < 0 {
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
		wr:     unsafe.Slice((*verbs.SendWR)(mem), capacity),
		sge:    unsafe.Slice((*verbs.SGE)(unsafe.Add(mem, wrSize)), capacity*maxSGE),
		bad:    (**verbs.SendWR)(unsafe.Add(mem, wrSize+sgeSize)),
		inl:    unsafe.Slice((*byte)(unsafe.Add(mem, wrSize+sgeSize+badSize)), capacity*inlineCap),
		mem:    mem,
		maxSGE: maxSGE,
		inlCap: inlineCap,
	}
	for i := range c.wr {
		if i+1 < capacity {
			c.wr[i].Next = &c.wr[i+1]
		}
		c.wr[i].SGList = &c.sge[i*maxSGE]
	}
	return c, nil
}

// Free releases the chain's C memory. The chain must not be used afterwards.
func (c *SendChain) Free() {
	if c.mem != nil {
		cfree(c.mem)
	}
	*c = SendChain{}
}

// Cap is the number of WRs the chain holds.
func (c *SendChain) Cap() int { return len(c.wr) }

// Len is the number of pending WRs: added and not yet posted.
func (c *SendChain) Len() int { return c.n - c.head }

// Reset drops every pending WR; the next Add fills WR 0.
func (c *SendChain) Reset() { c.head, c.n = 0, 0 }

// Skip drops the first pending WR (after a PostError, the one that failed),
// leaving the rest pending. It does nothing on an empty chain.
func (c *SendChain) Skip() {
	if c.head < c.n {
		c.head++
	}
	if c.head == c.n {
		c.Reset()
	}
}

// WR returns WR i of the chain, for fields the Add methods do not set. Its
// Next and SGList belong to the chain: do not change them.
func (c *SendChain) WR(i int) *verbs.SendWR { return &c.wr[i] }

// add fills the common part of the next WR, or returns nil when the chain is full.
func (c *SendChain) add(wrID uint64, op verbs.WROpcode, flags verbs.SendFlags, sge verbs.SGE) *verbs.SendWR {
	i := c.n
	if uint(i) >= uint(len(c.wr)) {
		return nil
	}
	w := &c.wr[i]
	w.WRID = wrID
	w.NumSGE = 1
	w.Opcode = op
	w.SendFlags = uint32(flags)
	*w.SGList = sge
	c.n = i + 1
	return w
}

// Every Add method fills the next WR, reports false (changing nothing) when
// the chain is full, and does not allocate. flags are IBV_SEND_* flags;
// Signaled asks for a completion. Immediate data is given in host order.

// AddSend adds a send (IBV_WR_SEND).
func (c *SendChain) AddSend(wrID uint64, flags verbs.SendFlags, sge verbs.SGE) bool {
	return c.add(wrID, verbs.WROpSend, flags, sge) != nil
}

// AddSendImm adds a send with immediate data (IBV_WR_SEND_WITH_IMM).
func (c *SendChain) AddSendImm(wrID uint64, flags verbs.SendFlags, imm uint32, sge verbs.SGE) bool {
	w := c.add(wrID, verbs.WROpSendWithImm, flags, sge)
	if w == nil {
		return false
	}
	w.ImmData = verbs.ToBe32(imm)
	return true
}

// AddWrite adds an RDMA write of sge to remoteAddr under rkey (IBV_WR_RDMA_WRITE).
func (c *SendChain) AddWrite(wrID uint64, flags verbs.SendFlags, sge verbs.SGE, remoteAddr uint64, rkey uint32) bool {
	w := c.add(wrID, verbs.WROpRDMAWrite, flags, sge)
	if w == nil {
		return false
	}
	r := w.WR.RDMA()
	r.RemoteAddr = remoteAddr
	r.Rkey = rkey
	return true
}

// AddWriteImm adds an RDMA write with immediate data (IBV_WR_RDMA_WRITE_WITH_IMM).
func (c *SendChain) AddWriteImm(wrID uint64, flags verbs.SendFlags, imm uint32, sge verbs.SGE, remoteAddr uint64, rkey uint32) bool {
	w := c.add(wrID, verbs.WROpRDMAWriteWithImm, flags, sge)
	if w == nil {
		return false
	}
	w.ImmData = verbs.ToBe32(imm)
	r := w.WR.RDMA()
	r.RemoteAddr = remoteAddr
	r.Rkey = rkey
	return true
}

// AddRead adds an RDMA read from remoteAddr under rkey into sge (IBV_WR_RDMA_READ).
func (c *SendChain) AddRead(wrID uint64, flags verbs.SendFlags, sge verbs.SGE, remoteAddr uint64, rkey uint32) bool {
	w := c.add(wrID, verbs.WROpRDMARead, flags, sge)
	if w == nil {
		return false
	}
	r := w.WR.RDMA()
	r.RemoteAddr = remoteAddr
	r.Rkey = rkey
	return true
}

// AddCompareSwap adds an 8-byte atomic compare-and-swap at remoteAddr
// (IBV_WR_ATOMIC_CMP_AND_SWP); the old value lands in sge (length 8).
func (c *SendChain) AddCompareSwap(wrID uint64, flags verbs.SendFlags, sge verbs.SGE, remoteAddr uint64, rkey uint32, compare, swap uint64) bool {
	w := c.add(wrID, verbs.WROpAtomicCmpAndSwp, flags, sge)
	if w == nil {
		return false
	}
	a := &w.WR.Atomic
	a.RemoteAddr = remoteAddr
	a.Rkey = rkey
	a.CompareAdd = compare
	a.Swap = swap
	return true
}

// AddFetchAdd adds an 8-byte atomic fetch-and-add of add at remoteAddr
// (IBV_WR_ATOMIC_FETCH_AND_ADD); the old value lands in sge (length 8).
func (c *SendChain) AddFetchAdd(wrID uint64, flags verbs.SendFlags, sge verbs.SGE, remoteAddr uint64, rkey uint32, add uint64) bool {
	w := c.add(wrID, verbs.WROpAtomicFetchAndAdd, flags, sge)
	if w == nil {
		return false
	}
	a := &w.WR.Atomic
	a.RemoteAddr = remoteAddr
	a.Rkey = rkey
	a.CompareAdd = add
	return true
}

// AddInline adds a send whose payload is copied now into the chain's inline
// staging (IBV_WR_SEND with IBV_SEND_INLINE): data may be Go memory and may be
// reused as soon as AddInline returns. It reports false when the chain is full
// or data is longer than the chain's inlineCap (the QP's max_inline_data
// limits it too: the provider rejects longer data at post time).
func (c *SendChain) AddInline(wrID uint64, flags verbs.SendFlags, data []byte) bool {
	i := c.n
	if len(data) > c.inlCap || uint(i) >= uint(len(c.wr)) {
		return false
	}
	buf := c.inl[i*c.inlCap : i*c.inlCap+len(data)]
	copy(buf, data)
	var addr uintptr
	if len(buf) > 0 {
		addr = uintptr(unsafe.Pointer(&buf[0]))
	}
	c.add(wrID, verbs.WROpSend, flags|verbs.SendInline, verbs.SGE{Addr: uint64(addr), Length: uint32(len(data))})
	return true
}

// AddUD adds a send on a UD QP to remoteQPN through ah with qkey. ah must be C
// memory (from ibv_create_ah) and outlive the post.
func (c *SendChain) AddUD(wrID uint64, flags verbs.SendFlags, sge verbs.SGE, ah *verbs.AH, remoteQPN, qkey uint32) bool {
	w := c.add(wrID, verbs.WROpSend, flags, sge)
	if w == nil {
		return false
	}
	u := w.WR.UD()
	u.AH = ah
	u.RemoteQPN = remoteQPN
	u.RemoteQkey = qkey
	return true
}

// AddUDImm is AddUD with immediate data (IBV_WR_SEND_WITH_IMM).
func (c *SendChain) AddUDImm(wrID uint64, flags verbs.SendFlags, imm uint32, sge verbs.SGE, ah *verbs.AH, remoteQPN, qkey uint32) bool {
	w := c.add(wrID, verbs.WROpSendWithImm, flags, sge)
	if w == nil {
		return false
	}
	w.ImmData = verbs.ToBe32(imm)
	u := w.WR.UD()
	u.AH = ah
	u.RemoteQPN = remoteQPN
	u.RemoteQkey = qkey
	return true
}

// AppendSGE adds a scatter/gather entry to the last WR added. It reports
// false when there is none or it already has the chain's maxSGE entries. It
// does not allocate.
func (c *SendChain) AppendSGE(sge verbs.SGE) bool {
	i := c.n - 1
	if i < c.head {
		return false
	}
	w := &c.wr[i]
	k := int(w.NumSGE)
	if k >= c.maxSGE {
		return false
	}
	c.sge[i*c.maxSGE+k] = sge
	w.NumSGE = int32(k + 1)
	return true
}

// PostSend posts the pending WRs to qp with one ibv_post_send call. On
// success the chain is empty. On failure it returns a *PostError (see
// PostError for what was posted and what is left). It does not allocate.
func (c *SendChain) PostSend(qp *verbs.QP) error {
	if c.head == c.n {
		return nil
	}
	last := &c.wr[c.n-1]
	next := last.Next
	last.Next = nil
	*c.bad = nil
	rc := verbs.PostSend(qp, &c.wr[c.head], c.bad)
	last.Next = next
	if rc == 0 {
		c.head, c.n = 0, 0
		return nil
	}
	idx := c.head
	if bad := *c.bad; bad != nil {
		off := uintptr(unsafe.Pointer(bad)) - uintptr(unsafe.Pointer(&c.wr[0]))
		size := unsafe.Sizeof(c.wr[0])
		if k := int(off / size); off%size == 0 && k >= c.head && k < c.n {
			idx = k
		}
	}
	c.err = PostError{Op: "ibv_post_send", Index: idx, Posted: idx - c.head, Errno: errnoOf(rc)}
	c.head = idx
	return &c.err
}

// PostSendv posts each pending WR with rdma_post_sendv on id: wr_id is the
// context that comes back as the completion's wr_id; the scatter list and
// send_flags are the WR's; its opcode is ignored (a send). One cgo call for
// the chain, stopping at the first failure with a *PostError. It does not
// allocate.
func (c *SendChain) PostSendv(id *rdmacm.CMID) error {
	return c.cmPost(id, C.GOVERBS_CM_SENDV, "rdma_post_sendv")
}

// PostReadv is PostSendv with rdma_post_readv: each WR reads from its
// remote address and rkey (as AddRead sets them) into its scatter list.
func (c *SendChain) PostReadv(id *rdmacm.CMID) error {
	return c.cmPost(id, C.GOVERBS_CM_READV, "rdma_post_readv")
}

// PostWritev is PostSendv with rdma_post_writev: each WR writes its scatter
// list to its remote address and rkey (as AddWrite sets them).
func (c *SendChain) PostWritev(id *rdmacm.CMID) error {
	return c.cmPost(id, C.GOVERBS_CM_WRITEV, "rdma_post_writev")
}

func (c *SendChain) cmPost(id *rdmacm.CMID, kind C.int, op string) error {
	if c.head == c.n {
		return nil
	}
	r := C.goverbs_cm_post_send((*C.struct_rdma_cm_id)(unsafe.Pointer(id)), kind,
		(*C.struct_ibv_send_wr)(unsafe.Pointer(&c.wr[c.head])), C.int(c.n-c.head))
	if r == 0 {
		c.head, c.n = 0, 0
		return nil
	}
	k, errno := split(r)
	c.err = PostError{Op: op, Index: c.head + k, Posted: k, Errno: errno}
	c.head += k
	return &c.err
}
