package hand

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// QPType is a QP transport.
type QPType uint32

const (
	RC = QPType(verbs.QPTRC) // reliable connected
	UC = QPType(verbs.QPTUC) // unreliable connected
	UD = QPType(verbs.QPTUD) // unreliable datagram
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint32(t))
}

// QPCaps sizes a QP's queues. Each is 0 to 2^32-1, what struct
// ibv_qp_cap holds (the device's limits are lower); a MaxSendSGE or
// MaxRecvSGE of 0 means 1.
type QPCaps struct {
	MaxSendWR, MaxRecvWR   int
	MaxSendSGE, MaxRecvSGE int
	MaxInlineData          int
}

// check refuses a count struct ibv_qp_cap cannot hold, and no WRs either way.
func (c QPCaps) check(op string) error {
	for _, f := range [...]struct {
		name string
		v    int
	}{
		{"Caps.MaxSendWR", c.MaxSendWR}, {"Caps.MaxRecvWR", c.MaxRecvWR},
		{"Caps.MaxSendSGE", c.MaxSendSGE}, {"Caps.MaxRecvSGE", c.MaxRecvSGE},
		{"Caps.MaxInlineData", c.MaxInlineData},
	} {
		if err := checkRange(op, f.name, f.v, 0, math.MaxUint32); err != nil {
			return err
		}
	}
	if c.MaxSendWR == 0 && c.MaxRecvWR == 0 {
		return &AttrError{Op: op, Field: "Caps", Reason: "MaxSendWR and MaxRecvWR are both zero"}
	}
	return nil
}

// QPConfig describes a QP for PD.NewQP.
type QPConfig struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ  // nil: SendCQ
	SRQ    *SRQ // receives come from the SRQ; Caps.MaxRecvWR is ignored
	Caps   QPCaps
	// SignalAll makes every send WR generate a completion, whatever its
	// IBV_SEND_SIGNALED flag.
	SignalAll bool
}

// QP is a queue pair (struct ibv_qp). Post to it with the fast paths
// (RecvChain.PostRecv(qp), SendChain.PostSend(qp)).
type QP struct {
	object
	pd   *PD
	ctx  *Context
	raw  *verbs.QP
	num  uint32
	typ  QPType
	caps QPCaps
	// modifyMu is held from a transition's check of the state to the end
	// of its ibv_modify_qp, and around ibv_query_qp, which writes the state
	// too. libibverbs keeps the state in struct ibv_qp, plain C memory that
	// the read lock every user holds orders nothing in: without it two
	// ToInits could both pass the RESET check, a query could write an old
	// state back over a transition's, and on arm64, whose loads may pass
	// each other, a ToRTR could see INIT and still read ToInit's port from
	// before it.
	modifyMu sync.Mutex
	port     int          // the port ToInit chose; under modifyMu
	cmID     *rdmacm.CMID // set when rdma_cm made the QP: rdma_destroy_qp destroys it
}

// NewQP creates a QP in the RESET state.
func (pd *PD) NewQP(cfg QPConfig) (*QP, error) {
	attr, objs, err := cfg.initAttr(pd, "PD.NewQP")
	if err != nil {
		return nil, err
	}
	release, err := useAll(objs...)
	if err != nil {
		return nil, err
	}
	defer release()
	raw, err := verbs.CreateQP(pd.raw, &attr)
	if err != nil {
		return nil, fmt.Errorf("%w (%s QP, caps %+v)", err, cfg.Type, cfg.Caps)
	}
	return newQP(pd, raw, cfg.Type, &attr, nil, objs), nil
}

// initAttr validates cfg and returns its struct ibv_qp_init_attr and the
// objects the QP depends on.
func (cfg QPConfig) initAttr(pd *PD, op string) (verbs.QPInitAttr, []*object, error) {
	var attr verbs.QPInitAttr
	switch cfg.Type {
	case RC, UC, UD:
	default:
		return attr, nil, &AttrError{Op: op, Field: "Type", Reason: fmt.Sprintf("%s: use RC, UC or UD", cfg.Type)}
	}
	if cfg.SendCQ == nil {
		return attr, nil, &AttrError{Op: op, Field: "SendCQ", Reason: "required"}
	}
	recv := cfg.RecvCQ
	if recv == nil {
		recv = cfg.SendCQ
	}
	for _, cq := range []*CQ{cfg.SendCQ, recv} {
		if cq.ctx.raw != pd.ctx.raw {
			return attr, nil, &AttrError{Op: op, Field: "SendCQ/RecvCQ", Reason: "belongs to another device context than the PD"}
		}
	}
	if cfg.SRQ != nil && cfg.SRQ.pd.ctx.raw != pd.ctx.raw {
		return attr, nil, &AttrError{Op: op, Field: "SRQ", Reason: "belongs to another device context than the PD"}
	}
	if err := cfg.Caps.check(op); err != nil {
		return attr, nil, err
	}
	attr = verbs.QPInitAttr{
		SendCQ: cfg.SendCQ.raw,
		RecvCQ: recv.raw,
		QPType: verbs.QPType(cfg.Type),
		Cap: verbs.QPCap{
			MaxSendWR:     uint32(cfg.Caps.MaxSendWR),
			MaxRecvWR:     uint32(cfg.Caps.MaxRecvWR),
			MaxSendSGE:    uint32(max(cfg.Caps.MaxSendSGE, 1)),
			MaxRecvSGE:    uint32(max(cfg.Caps.MaxRecvSGE, 1)),
			MaxInlineData: uint32(cfg.Caps.MaxInlineData),
		},
	}
	objs := []*object{&pd.object, &cfg.SendCQ.object, &recv.object}
	if cfg.SRQ != nil {
		attr.SRQ = cfg.SRQ.raw
		attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE = 0, 0
		objs = append(objs, &cfg.SRQ.object)
	}
	if cfg.SignalAll {
		attr.SQSigAll = 1
	}
	return attr, objs, nil
}

func newQP(pd *PD, raw *verbs.QP, typ QPType, attr *verbs.QPInitAttr, id *rdmacm.CMID, parents []*object) *QP {
	q := &QP{pd: pd, ctx: pd.ctx, raw: raw, num: raw.QPNum, typ: typ, cmID: id, caps: QPCaps{
		MaxSendWR:     int(attr.Cap.MaxSendWR),
		MaxRecvWR:     int(attr.Cap.MaxRecvWR),
		MaxSendSGE:    int(attr.Cap.MaxSendSGE),
		MaxRecvSGE:    int(attr.Cap.MaxRecvSGE),
		MaxInlineData: int(attr.Cap.MaxInlineData),
	}}
	q.init(fmt.Sprintf("%s QP %d", q.typ, q.num), parents...)
	pd.ctx.register(unsafe.Pointer(raw), q)
	return q
}

// Raw returns the struct ibv_qp, valid until Close.
func (q *QP) Raw() *verbs.QP { return q.raw }

// Num returns the QP number, which the peer needs.
func (q *QP) Num() uint32 { return q.num }

// Type returns the transport.
func (q *QP) Type() QPType { return q.typ }

// Caps returns the queue sizes the provider granted (at least those asked).
func (q *QP) Caps() QPCaps { return q.caps }

// PD returns the QP's protection domain.
func (q *QP) PD() *PD { return q.pd }

// Close destroys the QP. Outstanding work requests are discarded without
// completions: move the QP to ERR and drain its CQs first to get them back.
// The QP of a Conn is the Conn's: its Close returns a *BusyError naming
// the Conn, and Conn.Close closes it (the Conn's posts, rdma_post_*v,
// would otherwise reach a QP librdmacm had destroyed).
func (q *QP) Close() error {
	if q.cmID != nil && !q.isClosed() {
		return &BusyError{Object: q.label, Owner: "its Conn"}
	}
	return q.closeOwned()
}

// closeOwned is Close without the owner's check: Close, or the owning
// Conn's Close.
func (q *QP) closeOwned() error {
	return q.close(func() error {
		if q.cmID != nil {
			rdmacm.DestroyQP(q.cmID) // returns nothing; it destroys the QP (and CQs it made itself)
		} else if err := verbs.DestroyQP(q.raw); err != nil {
			return err
		}
		q.ctx.unregister(unsafe.Pointer(q.raw), q)
		return nil
	}, nil, nil)
}

// State returns the QP's current state, as the device reports it
// (ibv_query_qp), so it shows a QP the device moved to ERR on its own.
func (q *QP) State() (QPState, error) {
	a, _, err := q.query(verbs.QPAttrState)
	return a.QPState, err
}

// Query returns the QP's attributes and creation attributes (ibv_query_qp
// with every attribute).
func (q *QP) Query() (verbs.QPAttr, verbs.QPInitAttr, error) {
	const all = verbs.QPAttrState | verbs.QPAttrCurState | verbs.QPAttrEnSqdAsyncNotify | verbs.QPAttrAccessFlags |
		verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrQKey | verbs.QPAttrAv | verbs.QPAttrPathMTU |
		verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrRQPSN |
		verbs.QPAttrMaxQPRDAtomic | verbs.QPAttrAltPath | verbs.QPAttrMinRNRTimer | verbs.QPAttrSQPSN |
		verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrPathMigState | verbs.QPAttrCap | verbs.QPAttrDestQPN
	return q.query(all)
}

func (q *QP) query(mask verbs.QPAttrMask) (verbs.QPAttr, verbs.QPInitAttr, error) {
	var a verbs.QPAttr
	var ia verbs.QPInitAttr
	if err := q.use(); err != nil {
		return a, ia, err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	return a, ia, verbs.QueryQP(q.raw, &a, mask, &ia)
}

// Path is where a QP's packets go (struct ibv_ah_attr): for RoCE, and for
// InfiniBand across subnets, the peer's GID and the local GID index (a
// global route header); for InfiniBand within a subnet, the peer's LID.
type Path struct {
	Port int // local port; 0 means 1

	// Global route (RoCE always uses one): used when DGID is set.
	DGID      GID
	SGIDIndex int // index of the local GID: Context.RoCEv2IPv4GID or GIDForAddr
	// HopLimit bounds the routers a RoCE v2 packet may cross (the IP
	// TTL); 0 means 64, what the kernel's rdma_cm uses for a RoCE route
	// (the IP default), so that a routed RoCE v2 network works. rdma-core's
	// ibv_*_pingpong tools use 1, which keeps packets on the local subnet:
	// set 1 to match them exactly.
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32

	// InfiniBand local route.
	DLID        uint16
	SL          uint8
	SrcPathBits uint8

	StaticRate Rate
}

func (p Path) port() int { return max(p.Port, 1) }

func (p Path) ahAttr() verbs.AHAttr {
	a := verbs.AHAttr{
		DLID:        p.DLID,
		SL:          p.SL,
		SrcPathBits: p.SrcPathBits,
		StaticRate:  uint8(p.StaticRate),
		PortNum:     uint8(p.port()),
	}
	if !p.DGID.IsZero() {
		a.IsGlobal = 1
		a.GRH = verbs.GlobalRoute{
			DGID:         p.DGID.Raw(),
			FlowLabel:    p.FlowLabel,
			SGIDIndex:    uint8(p.SGIDIndex),
			HopLimit:     p.HopLimit,
			TrafficClass: p.TrafficClass,
		}
		if a.GRH.HopLimit == 0 {
			a.GRH.HopLimit = 64
		}
	}
	return a
}

// check validates p against the local port: RoCE needs a GID and a valid
// GID index, InfiniBand a LID or a GID. The caller holds ctx.
func (p Path) check(ctx *Context, op string) (verbs.PortAttr, error) {
	var pa verbs.PortAttr
	if p.Port < 0 || p.Port > 255 {
		return pa, &AttrError{Op: op, Field: "Path.Port", Reason: fmt.Sprintf("%d: ports are numbered from 1", p.Port)}
	}
	if !p.DGID.IsZero() {
		// struct ibv_global_route's sgid_index is 8 bits, whatever the table's length.
		if err := checkRange(op, "Path.SGIDIndex", p.SGIDIndex, 0, math.MaxUint8); err != nil {
			return pa, err
		}
	}
	if err := verbs.QueryPort(ctx.raw, uint8(p.port()), &pa); err != nil {
		err = fmt.Errorf("port %d: %w", p.port(), err)
		return pa, err
	}
	if !p.DGID.IsZero() {
		if p.SGIDIndex < 0 || p.SGIDIndex >= int(pa.GIDTblLen) {
			return pa, &AttrError{Op: op, Field: "Path.SGIDIndex", Reason: fmt.Sprintf("%d: port %d has %d GIDs", p.SGIDIndex, p.port(), pa.GIDTblLen)}
		}
		return pa, nil
	}
	if uint32(pa.LinkLayer) == verbs.LinkLayerEthernet {
		return pa, &AttrError{Op: op, Field: "Path.DGID", Reason: fmt.Sprintf("port %d is RoCE (Ethernet), which routes by GID: set DGID to the peer's GID and SGIDIndex to the local RoCE v2 GID (Context.RoCEv2IPv4GID)", p.port())}
	}
	if p.DLID == 0 {
		return pa, &AttrError{Op: op, Field: "Path.DLID", Reason: "InfiniBand needs the peer's LID (or a DGID for a global route)"}
	}
	return pa, nil
}

// InitAttr configures the RESET to INIT transition.
type InitAttr struct {
	Port      int    // 0 means 1
	PKeyIndex int    //
	Access    Access // RC and UC: what the peer may do (AccessRemoteWrite...)
	QKey      uint32 // UD: the Q_Key datagrams must carry
}

// ToInit moves the QP from RESET to INIT.
func (q *QP) ToInit(a InitAttr) error {
	const op = "QP.ToInit"
	if err := checkRange(op, "PKeyIndex", a.PKeyIndex, 0, math.MaxUint16); err != nil {
		return err
	}
	if err := q.use(); err != nil {
		return err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	if s := q.raw.State; s != verbs.QPSReset {
		return &AttrError{Op: op, Field: "state", Reason: fmt.Sprintf("the QP is in %s, not RESET", stateName(s))}
	}
	port := max(a.Port, 1)
	if a.Port < 0 || port > 255 {
		return &AttrError{Op: op, Field: "Port", Reason: fmt.Sprintf("%d: ports are numbered from 1", a.Port)}
	}
	attr := verbs.QPAttr{QPState: verbs.QPSInit, PKeyIndex: uint16(a.PKeyIndex), PortNum: uint8(port)}
	mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
	switch q.typ {
	case RC, UC:
		if q.typ == UC && a.Access&(AccessRemoteRead|AccessRemoteAtomic) != 0 {
			return &AttrError{Op: op, Field: "Access", Reason: "UC has no RDMA read or atomics"}
		}
		attr.QPAccessFlags = verbs.AccessFlags(a.Access)
		mask |= verbs.QPAttrAccessFlags
	case UD:
		if a.Access != 0 {
			return &AttrError{Op: op, Field: "Access", Reason: "UD QPs have no remote access"}
		}
		attr.QKey = a.QKey
		mask |= verbs.QPAttrQKey
	}
	if err := q.modify(&attr, mask, "to INIT"); err != nil {
		return err
	}
	q.port = port
	return nil
}

// RTRAttr configures the INIT to RTR transition.
type RTRAttr struct {
	Path    Path   // RC and UC: how to reach the peer
	DestQPN uint32 // RC and UC: the peer's QP number
	RQPSN   uint32 // RC and UC: the first PSN the peer sends (its SQPSN)
	// MTU is the path MTU; 0 means the port's active MTU. It must not
	// exceed the active MTU of either side.
	MTU MTU
	// RC: RDMA reads and atomics the peer may have outstanding to this QP;
	// 0 means 16, or the device maximum if lower.
	MaxDestRDAtomic int
	// RC: the RNR NAK delay to ask the peer for (IB encoding); 0 means 12
	// (0.64 ms).
	MinRNRTimer uint8
}

const psnMask = 1<<24 - 1

// ToRTR moves the QP from INIT to RTR (ready to receive).
func (q *QP) ToRTR(a RTRAttr) error {
	const op = "QP.ToRTR"
	if q.typ == RC {
		if err := checkRange(op, "MaxDestRDAtomic", a.MaxDestRDAtomic, 0, math.MaxUint8); err != nil {
			return err
		}
	}
	if err := q.use(); err != nil {
		return err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	if s := q.raw.State; s != verbs.QPSInit {
		return &AttrError{Op: op, Field: "state", Reason: fmt.Sprintf("the QP is in %s, not INIT (call ToInit first)", stateName(s))}
	}
	attr := verbs.QPAttr{QPState: verbs.QPSRtr}
	mask := verbs.QPAttrState
	if q.typ != UD {
		port := q.port
		if a.Path.Port != 0 && a.Path.Port != port {
			return &AttrError{Op: op, Field: "Path.Port", Reason: fmt.Sprintf("%d, but ToInit chose port %d", a.Path.Port, port)}
		}
		a.Path.Port = port
		pa, err := a.Path.check(q.ctx, op)
		if err != nil {
			return err
		}
		if a.DestQPN == 0 || a.DestQPN > psnMask {
			return &AttrError{Op: op, Field: "DestQPN", Reason: fmt.Sprintf("%d: the peer's QP number is a non-zero 24-bit value", a.DestQPN)}
		}
		if a.RQPSN > psnMask {
			return &AttrError{Op: op, Field: "RQPSN", Reason: fmt.Sprintf("%#x: PSNs are 24-bit", a.RQPSN)}
		}
		mtu := a.MTU
		if mtu == 0 {
			mtu = pa.ActiveMTU
		}
		if mtu < verbs.MTU256 || mtu > pa.ActiveMTU {
			return &AttrError{Op: op, Field: "MTU", Reason: fmt.Sprintf("%s: port %d's active MTU is %s", mtuName(mtu), a.Path.Port, mtuName(pa.ActiveMTU))}
		}
		attr.AHAttr = a.Path.ahAttr()
		attr.PathMTU = mtu
		attr.DestQPNum = a.DestQPN
		attr.RQPSN = a.RQPSN
		mask |= verbs.QPAttrAv | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
		if q.typ == RC {
			rd := a.MaxDestRDAtomic
			if rd == 0 {
				da, err := q.ctx.queryDeviceLocked()
				if err != nil {
					return err
				}
				rd = min(16, int(da.MaxQPRDAtom))
			}
			attr.MaxDestRDAtomic = uint8(rd)
			attr.MinRNRTimer = a.MinRNRTimer
			if attr.MinRNRTimer == 0 {
				attr.MinRNRTimer = 12
			}
			mask |= verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
		}
	}
	return q.modify(&attr, mask, "to RTR")
}

// NoRetry asks for zero retries in RTSAttr, where 0 means the default.
const NoRetry = -1

// defaultRetryCount is the transport retry count that 0 asks for: 6, not
// the maximum 7, because soft-RoCE (rdma_rxe) takes a retry_cnt of 7 to
// mean "retry forever", as the RNR retry count does: a send to a peer that
// died would never fail with IBV_WC_RETRY_EXC_ERR, and a poller waiting for
// it would wait forever (seen on Linux 6.1 in the two-host fault tests).
const defaultRetryCount = 6

// RTSAttr configures the RTR to RTS transition.
type RTSAttr struct {
	SQPSN uint32 // the first PSN this QP sends (the peer's RQPSN)
	// RC: the local ACK timeout, 4.096 us * 2^Timeout; 0 means 14 (about
	// 67 ms).
	Timeout uint8
	// RC: transport retries and RNR retries (7 means forever for RNR);
	// 0 means defaultRetryCount (6) and 7; NoRetry means none.
	RetryCount, RNRRetry int
	// RC: RDMA reads and atomics this QP may have outstanding; 0 means 16,
	// or the device maximum if lower.
	MaxRDAtomic int
}

// ToRTS moves the QP from RTR to RTS (ready to send).
func (q *QP) ToRTS(a RTSAttr) error {
	const op = "QP.ToRTS"
	if q.typ == RC {
		if err := checkRange(op, "MaxRDAtomic", a.MaxRDAtomic, 0, math.MaxUint8); err != nil {
			return err
		}
	}
	if err := q.use(); err != nil {
		return err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	if s := q.raw.State; s != verbs.QPSRtr {
		return &AttrError{Op: op, Field: "state", Reason: fmt.Sprintf("the QP is in %s, not RTR (call ToRTR first)", stateName(s))}
	}
	if a.SQPSN > psnMask {
		return &AttrError{Op: op, Field: "SQPSN", Reason: fmt.Sprintf("%#x: PSNs are 24-bit", a.SQPSN)}
	}
	attr := verbs.QPAttr{QPState: verbs.QPSRts, SQPSN: a.SQPSN}
	mask := verbs.QPAttrState | verbs.QPAttrSQPSN
	if q.typ == RC {
		retry := func(field string, v, def int) (uint8, error) {
			switch {
			case v == NoRetry:
				return 0, nil
			case v == 0:
				return uint8(def), nil
			case v < 0 || v > 7:
				return 0, &AttrError{Op: op, Field: field, Reason: fmt.Sprintf("%d: 0 to 7, or NoRetry", v)}
			}
			return uint8(v), nil
		}
		var err error
		if attr.RetryCnt, err = retry("RetryCount", a.RetryCount, defaultRetryCount); err != nil {
			return err
		}
		if attr.RNRRetry, err = retry("RNRRetry", a.RNRRetry, 7); err != nil {
			return err
		}
		attr.Timeout = a.Timeout
		if attr.Timeout == 0 {
			attr.Timeout = 14
		}
		rd := a.MaxRDAtomic
		if rd == 0 {
			da, err := q.ctx.queryDeviceLocked()
			if err != nil {
				return err
			}
			rd = min(16, int(da.MaxQPInitRDAtom))
		}
		attr.MaxRDAtomic = uint8(rd)
		mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic
	}
	return q.modify(&attr, mask, "to RTS")
}

// ToError moves the QP to ERR: outstanding and later-posted work requests
// complete with a flush error (IBV_WC_WR_FLUSH_ERR), which is how to get
// every posted receive buffer back before Close.
func (q *QP) ToError() error {
	if err := q.use(); err != nil {
		return err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	return q.modify(&verbs.QPAttr{QPState: verbs.QPSErr}, verbs.QPAttrState, "to ERR")
}

// ToReset moves the QP to RESET, from any state, discarding its queues
// (without completions); ToInit may follow, to reuse the QP.
func (q *QP) ToReset() error {
	if err := q.use(); err != nil {
		return err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	return q.modify(&verbs.QPAttr{QPState: verbs.QPSReset}, verbs.QPAttrState, "to RESET")
}

// Modify is ibv_modify_qp with the caller's attributes and mask, for what
// the transition methods do not cover (alternate paths, SQD, rate limits).
func (q *QP) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	if err := q.use(); err != nil {
		return err
	}
	defer q.done()
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	step := "new attributes"
	if mask&verbs.QPAttrState != 0 {
		step = "to " + stateName(attr.QPState)
	}
	return q.modify(attr, mask, step)
}

func (q *QP) modify(attr *verbs.QPAttr, mask verbs.QPAttrMask, step string) error {
	if err := verbs.ModifyQP(q.raw, attr, mask); err != nil {
		return fmt.Errorf("QP %s: %w", step, err)
	}
	return nil
}

// Endpoint is what one side of an RC or UC connection tells the other over
// a side channel (a TCP socket, a file, an environment variable) before
// Connect: its QP number, first PSN and address. UnmarshalBinary treats its
// bytes as the peer's, untrusted: it refuses a QPN or PSN beyond 24 bits,
// QPN 0 or 1, and an address with neither GID nor LID, leaving e unchanged.
type Endpoint struct {
	QPN uint32
	PSN uint32
	GID GID    // RoCE, or a global InfiniBand route
	LID uint16 // InfiniBand
}

// EndpointSize is the length of a marshalled Endpoint.
const EndpointSize = 26

// MarshalBinary encodes e in EndpointSize bytes, big-endian.
func (e Endpoint) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, EndpointSize)
	b = binary.BigEndian.AppendUint32(b, e.QPN)
	b = binary.BigEndian.AppendUint32(b, e.PSN)
	b = append(b, e.GID[:]...)
	return binary.BigEndian.AppendUint16(b, e.LID), nil
}

// UnmarshalBinary decodes what MarshalBinary made.
func (e *Endpoint) UnmarshalBinary(b []byte) error {
	if len(b) != EndpointSize {
		return fmt.Errorf("goverbs: Endpoint is %d bytes, got %d", EndpointSize, len(b))
	}
	var d Endpoint
	d.QPN = binary.BigEndian.Uint32(b)
	d.PSN = binary.BigEndian.Uint32(b[4:])
	copy(d.GID[:], b[8:24])
	d.LID = binary.BigEndian.Uint16(b[24:])
	// The bytes come from the peer: what Connect would refuse later, or
	// hand to the device unchecked, is refused here, naming the field.
	switch {
	case d.QPN > psnMask:
		return fmt.Errorf("goverbs: Endpoint: QPN %#x is more than 24 bits", d.QPN)
	case d.QPN < 2:
		return fmt.Errorf("goverbs: Endpoint: QPN %d is a special QP (0 and 1 are the SMI and GSI QPs), not a connectable one", d.QPN)
	case d.PSN > psnMask:
		return fmt.Errorf("goverbs: Endpoint: PSN %#x is more than 24 bits", d.PSN)
	case d.GID.IsZero() && d.LID == 0:
		return errors.New("goverbs: Endpoint: neither a GID nor a LID: no address to connect to")
	}
	*e = d
	return nil
}

// RandomPSN returns a random 24-bit packet sequence number.
func RandomPSN() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) & psnMask
}

// ConnectAttr configures Connect.
type ConnectAttr struct {
	Port      int    // 0 means 1
	SGIDIndex int    // RoCE: the local GID index (Context.RoCEv2IPv4GID)
	Access    Access // what the peer may do to this QP's MRs
	PSN       uint32 // this side's first PSN (the Endpoint it sent)
	Remote    Endpoint
	MTU       MTU // 0: the port's active MTU
	// RTR and RTS tunables, as in RTRAttr and RTSAttr (0 means default).
	RTR RTRAttr
	RTS RTSAttr
}

// Connect brings a new RC or UC QP from RESET to RTS in one call: INIT
// with Access, RTR towards Remote (over a global route to Remote.GID when
// it is set, as RoCE requires, otherwise to Remote.LID), then RTS.
func (q *QP) Connect(a ConnectAttr) error {
	if q.typ != RC && q.typ != UC {
		return &AttrError{Op: "QP.Connect", Field: "type", Reason: q.typ.String() + " QPs do not connect: use ReadyUD"}
	}
	if err := q.ToInit(InitAttr{Port: a.Port, Access: a.Access}); err != nil {
		return err
	}
	rtr := a.RTR
	rtr.Path.Port = a.Port
	rtr.Path.DGID = a.Remote.GID
	rtr.Path.SGIDIndex = a.SGIDIndex
	rtr.Path.DLID = a.Remote.LID
	rtr.DestQPN = a.Remote.QPN
	rtr.RQPSN = a.Remote.PSN
	if a.MTU != 0 {
		rtr.MTU = a.MTU
	}
	if err := q.ToRTR(rtr); err != nil {
		return err
	}
	rts := a.RTS
	rts.SQPSN = a.PSN
	return q.ToRTS(rts)
}

// ReadyUD brings a new UD QP from RESET to RTS in one call. Datagrams to it
// must carry qkey; psn is its first send PSN.
func (q *QP) ReadyUD(port int, qkey, psn uint32) error {
	if q.typ != UD {
		return &AttrError{Op: "QP.ReadyUD", Field: "type", Reason: q.typ.String() + " QPs connect: use Connect"}
	}
	if err := q.ToInit(InitAttr{Port: port, QKey: qkey}); err != nil {
		return err
	}
	if err := q.ToRTR(RTRAttr{}); err != nil {
		return err
	}
	return q.ToRTS(RTSAttr{SQPSN: psn})
}

func stateName(s verbs.QPState) string {
	switch s {
	case verbs.QPSReset:
		return "RESET"
	case verbs.QPSInit:
		return "INIT"
	case verbs.QPSRtr:
		return "RTR"
	case verbs.QPSRts:
		return "RTS"
	case verbs.QPSSqd:
		return "SQD"
	case verbs.QPSSqe:
		return "SQE"
	case verbs.QPSErr:
		return "ERR"
	}
	return fmt.Sprintf("state %d", uint32(s))
}

func mtuName(m verbs.MTU) string {
	if m >= verbs.MTU256 && m <= verbs.MTU4096 {
		return fmt.Sprint(128 << m)
	}
	return fmt.Sprintf("MTU(%d)", uint32(m))
}
