package hand

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// rdma_cm for unreliable datagrams: RDMA_PS_UDP ids, whose QP is UD.
//
// The client dials (DialUD): rdma_cm resolves the address and the route,
// makes a UD QP, and asks the listener (a SIDR request) for its QP number
// and Q_Key; the answer comes with the address handle attributes, from
// which DialUD makes an AH. The server listens (ListenUD), takes requests
// (UDListener.Accept) and accepts them (UDRequest.Accept), which makes its
// UD QP and tells the client its QPN. Nothing is connected: each side
// sends datagrams with SendWRs.SetUD to an AH, a QPN and a Q_Key, and
// answers a datagram through the AH PD.NewAHFromWC makes of its
// completion, to WC.SrcQP.
//
// Every UD QP rdma_cm makes is in RTS with the Q_Key UDPQKey, which is
// also the Q_Key its peer's datagrams must carry. Receive buffers keep
// GRHSize bytes in front of the payload (UDRecvSGE, SplitUD).

// UDPQKey is the Q_Key of every RDMA_PS_UDP QP and multicast group rdma_cm
// sets up (RDMA_UDP_QKEY): the Q_Key of a reply to a datagram that came
// in on one.
const UDPQKey = uint32(rdmacm.UDPQKey)

// Private data sizes of SIDR, after rdma_cm's 36-byte header in the
// request.
const (
	maxSIDRReqData = 180
	maxSIDRRepData = 136
)

// UDConfig describes the UD QP of an rdma_cm datagram endpoint: DialUD,
// UDRequest.Accept and NewMulticast.
type UDConfig struct {
	// PD, SendCQ and RecvCQ, when set, must come from librdmacm's device
	// context for the address (see CMContext). A nil PD makes the endpoint
	// allocate its own; a nil SendCQ makes it create one CQ, with a
	// completion channel, for both directions (RecvCQ nil means SendCQ).
	PD             *PD
	SendCQ, RecvCQ *CQ
	Caps           QPCaps // 0 means 16 WRs and 1 SGE each way
	SignalAll      bool

	// PrivateData goes to the peer with the request (DialUD, at most 180
	// bytes) or the answer (UDRequest.Accept, at most 136 bytes).
	PrivateData []byte
	// BeforeConnect, when set, runs once the QP exists and before the
	// request or the answer goes out: post receives there, for a peer may
	// send as soon as it has the answer, and a datagram that finds no
	// receive is dropped. An error from it ends the dial or the accept;
	// what it made on the endpoint's own PD must then be closed by it, or
	// that PD cannot be.
	// NewMulticast refuses it: receives can be posted before Join.
	BeforeConnect func(*UDConn) error
	// StepTimeout bounds address and route resolution (DialUD) and the
	// SIDR request each; 0 means 2 s.
	StepTimeout time.Duration
	// LocalAddr is DialUD's source address, as ConnConfig.LocalAddr is
	// Dial's: the zero AddrPort means any, port 0 any port.
	// UDRequest.Accept and NewMulticast refuse it (NewMulticast takes its
	// local address as an argument).
	LocalAddr netip.AddrPort
}

// check refuses what the QP or the private data cannot be, before anything
// is made.
func (cfg *UDConfig) check(op string, maxData int) error {
	if len(cfg.PrivateData) > maxData {
		return &AttrError{Op: op, Field: "PrivateData", Reason: fmt.Sprintf("%d bytes: at most %d", len(cfg.PrivateData), maxData)}
	}
	return cmp.Or(checkLocalAddr(op, cfg.LocalAddr), cfg.caps().check(op))
}

func (cfg *UDConfig) caps() QPCaps {
	caps := cfg.Caps
	if caps.MaxSendWR == 0 && caps.MaxRecvWR == 0 {
		caps.MaxSendWR, caps.MaxRecvWR = 16, 16
	}
	return caps
}

// udQP is what a UD endpoint on an rdma_cm id owns: the id, its mailbox
// on the process's event channel, and the QP with its PD and CQs.
type udQP struct {
	id     *rdmacm.CMID
	ch     *cmChannel
	ctx    *Context
	pd     *PD
	sendCQ *CQ
	recvCQ *CQ
	qp     *QP
	cqCh   *CompChannel // made with an own CQ
	ownPD  bool
	ownCQ  bool
}

// setup makes the context wrapper, the PD and CQs cfg lacks, and the UD QP
// (rdma_create_qp, which takes it to RTS with the id's Q_Key).
func (u *udQP) setup(cfg *UDConfig, op string) error {
	raw := u.id.Verbs
	u.ctx = cmContext(raw)
	for _, o := range []struct {
		field string
		ctx   *Context
	}{{"PD", pdCtx(cfg.PD)}, {"SendCQ", cqCtx(cfg.SendCQ)}, {"RecvCQ", cqCtx(cfg.RecvCQ)}} {
		if o.ctx != nil && o.ctx.raw != raw {
			return &AttrError{Op: op, Field: o.field, Reason: fmt.Sprintf("is not from librdmacm's context for %s, where the address is: make it from hand.CMContext(%q)", u.ctx.name, u.ctx.name)}
		}
	}
	var err error
	if u.pd = cfg.PD; u.pd == nil {
		if u.pd, err = u.ctx.AllocPD(); err != nil {
			return err
		}
		u.ownPD = true
	}
	caps := cfg.caps()
	if u.sendCQ, u.recvCQ = cfg.SendCQ, cfg.RecvCQ; u.sendCQ == nil {
		if u.cqCh, err = u.ctx.NewCompChannel(); err != nil {
			return err
		}
		if u.sendCQ, err = u.ctx.NewCQ(max(caps.MaxSendWR+caps.MaxRecvWR, 1), CQOptions{Channel: u.cqCh}); err != nil {
			return err
		}
		u.ownCQ = true
	}
	if u.recvCQ == nil {
		u.recvCQ = u.sendCQ
	}
	qcfg := QPConfig{Type: UD, SendCQ: u.sendCQ, RecvCQ: u.recvCQ, Caps: caps, SignalAll: cfg.SignalAll}
	attr, objs, err := qcfg.initAttr(u.pd, op)
	if err != nil {
		return err
	}
	release, err := useAll(objs...)
	if err != nil {
		return err
	}
	defer release()
	if err := rdmacm.CreateQP(u.id, u.pd.raw, &attr); err != nil {
		return err
	}
	u.qp = newQP(u.pd, u.id.QP, UD, &attr, u.id, objs)
	return nil
}

// release destroys what setup made and the id, in reverse order; ah, when
// not nil, goes before the PD.
func (u *udQP) release(ah *AH) error {
	var errs []error
	if ah != nil {
		errs = append(errs, ah.Close())
	}
	if u.qp != nil {
		errs = append(errs, u.qp.closeOwned())
	}
	if u.id != nil {
		errs = append(errs, rdmacm.DestroyID(u.id))
	}
	u.ch.close()
	if u.ownCQ {
		errs = append(errs, u.sendCQ.Close())
	}
	if u.cqCh != nil {
		errs = append(errs, u.cqCh.Close())
	}
	if u.ownPD {
		errs = append(errs, u.pd.Close())
	}
	if u.ctx != nil {
		errs = append(errs, u.ctx.Close())
	}
	return errors.Join(errs...)
}

// busyOwn reports user objects on what the endpoint made for itself, other
// than its QP and the objects in mine (its own AHs).
func (u *udQP) busyOwn(label string, mine ...*object) error {
	owned := append(ownObjects(u.ctx, u.pd, u.ownPD, u.sendCQ, u.ownCQ, u.cqCh), &u.qp.object)
	return busyOwned(label, append(owned, mine...)...)
}

// createUDPID creates an RDMA_PS_UDP id on ch.
func createUDPID(ch *rdmacm.EventChannel) (*rdmacm.CMID, error) {
	var id *rdmacm.CMID
	if err := rdmacm.CreateID(ch, &id, nil, rdmacm.PsUDP); err != nil {
		return nil, fmt.Errorf("create a UDP port space id: %w", err)
	}
	return id, nil
}

// udParam is the struct rdma_conn_param of a SIDR request or answer: the
// QP number and the private data, pinned as Conn.param pins it.
func udParam(qpn uint32, data []byte, pin *runtime.Pinner) rdmacm.ConnParam {
	p := rdmacm.ConnParam{QPNum: qpn}
	if len(data) > 0 {
		pin.Pin(&data[0])
		p.PrivateData = unsafe.Pointer(&data[0])
		p.PrivateDataLen = uint8(len(data))
	}
	return p
}

// NewAHFromAttr creates an address handle from address handle attributes
// rdma_cm gave (the ud parameter of an RDMA_CM_EVENT_ESTABLISHED or
// RDMA_CM_EVENT_MULTICAST_JOIN event): DialUD and Multicast.Join make
// theirs with it. The PD must be on the device the attributes are for.
func (pd *PD) NewAHFromAttr(attr *verbs.AHAttr) (*AH, error) {
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	if attr == nil {
		return nil, &AttrError{Op: "PD.NewAHFromAttr", Field: "attr", Reason: "nil"}
	}
	a := *attr // C reads a copy in Go memory with no Go pointers
	raw, err := verbs.CreateAH(pd.raw, &a)
	if err != nil {
		return nil, err
	}
	return newAH(pd, raw), nil
}

// UDConn is one side of an rdma_cm datagram exchange: a UD QP in RTS, its
// PD and CQs, and, on the dialling side, the AH, QPN and Q_Key of the
// listener's QP, ready for SendWRs.SetUD.
type UDConn struct {
	object
	udQP
	ah                    *AH
	remoteQPN, remoteQKey uint32
	peerData              []byte
	local, remote         netip.AddrPort
}

// DialUD asks the RDMA_PS_UDP listener at addr ("192.0.2.1:7174") for its
// UD QP: it resolves the address and the route, creates the UD QP cfg
// describes, runs cfg.BeforeConnect, sends the request (rdma_connect, a
// SIDR request) with cfg.PrivateData and waits for the answer. The UDConn
// it returns has the listener's AH, QPN and Q_Key. Every step honours ctx.
// A listener that rejects, or none, gives a *CMEventError matching
// syscall.EHOSTUNREACH or ECONNREFUSED.
func DialUD(ctx context.Context, addr string, cfg UDConfig) (*UDConn, error) {
	if err := cfg.check("DialUD", maxSIDRReqData); err != nil {
		return nil, err
	}
	ap, err := resolveAddrPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	ch, err := newCMChannel()
	if err != nil {
		return nil, err
	}
	c := &UDConn{}
	c.ch = ch
	wrap := func(step string, err error) (*UDConn, error) {
		c.release(c.ah)
		return nil, fmt.Errorf("goverbs: dial UD %s: %s: %w", ap, step, withCause(ctx, err))
	}
	if c.id, err = ch.create(createUDPID); err != nil {
		return wrap("creating the id", err)
	}
	if err := resolveIDAddr(ctx, ch, c.id, cfg.LocalAddr, ap, cfg.StepTimeout); err != nil {
		return wrap("resolving the address", err)
	}
	if err := resolveIDRoute(ctx, ch, c.id, cfg.StepTimeout); err != nil {
		return wrap("resolving the route", err)
	}
	if err := c.setup(&cfg, "DialUD"); err != nil {
		return wrap("creating the QP", err)
	}
	c.local, c.remote = srcAddr(c.id), dstAddr(c.id)
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(c); err != nil {
			return wrap("BeforeConnect", err)
		}
	}
	var pin runtime.Pinner
	param := udParam(c.qp.num, cfg.PrivateData, &pin)
	err = rdmacm.Connect(c.id, &param)
	pin.Unpin()
	if err != nil {
		return wrap("sending the request", err)
	}
	ev, err := ch.expect(ctx, "rdma_connect", rdmacm.CMEventEstablished)
	if err != nil {
		return wrap("waiting for the answer", err)
	}
	if c.ah, err = c.pd.NewAHFromAttr(&ev.ud.AHAttr); err != nil {
		return wrap("making the AH", err)
	}
	c.remoteQPN, c.remoteQKey, c.peerData = ev.ud.QPNum, ev.ud.QKey, ev.data
	c.init("UDConn " + c.local.String() + "->" + c.remote.String())
	return c, nil
}

// Raw returns the struct rdma_cm_id, valid until Close.
func (c *UDConn) Raw() *rdmacm.CMID { return c.id }

// QP returns the UD QP, in RTS with the Q_Key UDPQKey.
func (c *UDConn) QP() *QP { return c.qp }

// PD returns the endpoint's protection domain (cfg.PD, or its own).
func (c *UDConn) PD() *PD { return c.pd }

// SendCQ returns the CQ of the QP's send queue.
func (c *UDConn) SendCQ() *CQ { return c.sendCQ }

// RecvCQ returns the CQ of the QP's receive queue.
func (c *UDConn) RecvCQ() *CQ { return c.recvCQ }

// Context returns librdmacm's device context the QP is on.
func (c *UDConn) Context() *Context { return c.ctx }

// Port returns the device port the QP is on: PD.NewAHFromWC's port.
func (c *UDConn) Port() int { return int(c.id.PortNum) }

// AH returns the address handle of the listener's QP on the dialling
// side, nil on the accepting side (answer each datagram through
// PD.NewAHFromWC). The UDConn owns it: Close destroys it.
func (c *UDConn) AH() *AH { return c.ah }

// RemoteQPN and RemoteQKey return the listener's QP number and Q_Key on the
// dialling side. On the accepting side they are 0 and UDPQKey: a SIDR
// request carries no QPN, and each datagram says its sender's (WC.SrcQP).
func (c *UDConn) RemoteQPN() uint32  { return c.remoteQPN }
func (c *UDConn) RemoteQKey() uint32 { return c.remoteQKey }

// PeerPrivateData returns the private data the peer sent: the answer's on
// the dialling side, the request's on the accepting side (after
// rdma_cm's header, padded with zeros).
func (c *UDConn) PeerPrivateData() []byte { return c.peerData }

// LocalAddr and RemoteAddr return the IP endpoints of the exchange.
func (c *UDConn) LocalAddr() netip.AddrPort  { return c.local }
func (c *UDConn) RemoteAddr() netip.AddrPort { return c.remote }

// Close destroys the AH, the QP and the rdma_cm id, and closes the PD and
// CQ the UDConn made itself. It fails with a *BusyError, closing nothing,
// while MRs, AHs or other objects made on its own PD or CQ are open.
func (c *UDConn) Close() error {
	var mine []*object
	if c.ah != nil {
		mine = append(mine, &c.ah.object)
	}
	return c.closeTearing(func() error { return c.busyOwn(c.label, mine...) },
		func() error { return c.release(c.ah) }, c.ch.fd.interrupt, c.ch.fd.undo)
}

// UDListener waits for SIDR requests on an RDMA_PS_UDP address.
type UDListener struct{ cmListener }

// ListenUD binds an RDMA_PS_UDP listener to addr ("192.0.2.1:7174"; a
// port of 0 picks one, see Addr). The context bounds name resolution only.
func ListenUD(ctx context.Context, addr string) (*UDListener, error) {
	l := &UDListener{}
	if err := l.listen(ctx, addr, "listen UD", "UDListener", createUDPID); err != nil {
		return nil, err
	}
	return l, nil
}

// UDRequest is a SIDR request a UDListener received: Accept or Reject it;
// until then the client waits, for at most its StepTimeout.
type UDRequest struct {
	id     *rdmacm.CMID
	ch     *cmChannel
	data   []byte
	done   bool
	remote netip.AddrPort
	verbs  *verbs.Context
}

// Accept waits for the next request. It returns ctx.Err() when ctx ends
// first and ErrClosed when the UDListener is closed.
func (l *UDListener) Accept(ctx context.Context) (*UDRequest, error) {
	if err := l.use(); err != nil {
		return nil, err
	}
	defer l.done()
	for {
		ev, err := l.ch.next(ctx)
		if err != nil {
			return nil, err
		}
		if ev.typ != rdmacm.CMEventConnectRequest {
			continue
		}
		// The request's id has its own mailbox (ev.ch), as for Listener.Accept.
		return &UDRequest{id: ev.id, ch: ev.ch, data: ev.data, remote: dstAddr(ev.id), verbs: ev.id.Verbs}, nil
	}
}

// PrivateData returns what the client sent with the request.
func (r *UDRequest) PrivateData() []byte { return r.data }

// RemoteAddr returns the client's address.
func (r *UDRequest) RemoteAddr() netip.AddrPort { return r.remote }

// Context returns librdmacm's device context the request came in on: make
// the PD, CQs and MRs for its UDConfig from it.
func (r *UDRequest) Context() *Context { return cmContext(r.verbs) }

// Reject refuses the request, sending data (at most 136 bytes) to the
// client, whose DialUD fails with a *CMEventError.
func (r *UDRequest) Reject(data []byte) error {
	if r.done {
		return ErrClosed
	}
	if len(data) > maxSIDRRepData {
		return &AttrError{Op: "UDRequest.Reject", Field: "data", Reason: fmt.Sprintf("%d bytes: at most %d", len(data), maxSIDRRepData)}
	}
	r.done = true
	err := reject(r.id, data)
	rdmacm.DestroyID(r.id)
	r.ch.close()
	return err
}

// Accept creates the UD QP cfg describes, runs cfg.BeforeConnect, and
// answers the request with the QP's number and cfg.PrivateData (SIDR has
// no further handshake: the UDConn is ready when Accept returns). A cfg
// it cannot carry (*AttrError) is refused before anything is made, and
// the request stays pending. With ctx ended already, it rejects the
// request instead.
func (r *UDRequest) Accept(ctx context.Context, cfg UDConfig) (*UDConn, error) {
	if r.done {
		return nil, ErrClosed
	}
	if err := cmp.Or(cfg.check("UDRequest.Accept", maxSIDRRepData), refuseLocalAddr("UDRequest.Accept", cfg.LocalAddr)); err != nil {
		return nil, err
	}
	r.done = true
	if err := ctx.Err(); err != nil {
		reject(r.id, nil)
		rdmacm.DestroyID(r.id)
		r.ch.close()
		return nil, fmt.Errorf("goverbs: accept UD: %w", err)
	}
	c := &UDConn{peerData: r.data, remoteQKey: UDPQKey, local: srcAddr(r.id), remote: r.remote}
	c.id, c.ch = r.id, r.ch
	fail := func(err error) (*UDConn, error) {
		reject(c.id, nil)
		c.release(nil)
		return nil, fmt.Errorf("goverbs: accept UD from %s: %w", r.remote, err)
	}
	if err := c.setup(&cfg, "UDRequest.Accept"); err != nil {
		return fail(err)
	}
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(c); err != nil {
			return fail(fmt.Errorf("BeforeConnect: %w", err))
		}
	}
	var pin runtime.Pinner
	param := udParam(c.qp.num, cfg.PrivateData, &pin)
	err := rdmacm.Accept(c.id, &param)
	pin.Unpin()
	if err != nil {
		c.release(nil)
		return nil, fmt.Errorf("goverbs: accept UD from %s: %w", r.remote, err)
	}
	c.init("UDConn " + c.local.String() + "<-" + c.remote.String())
	return c, nil
}
