package hand

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"github.com/goverbs/goverbs/generated/rdmacm"
)

// McastQPN is the destination QPN of a datagram to a multicast group.
const McastQPN = 0xFFFFFF

// Multicast is a UD QP on an RDMA_PS_UDP rdma_cm id bound to a local
// address, which joins multicast groups (rdma_join_multicast): the QP
// receives what is sent to the groups it joined as a full member, and
// sends to a group through the McastGroup's AH, QPN and Q_Key.
type Multicast struct {
	object
	udQP
	local netip.Addr

	// joinMu makes joins one at a time: their events come on the id's one
	// channel, and a join takes the next join event as its own.
	joinMu sync.Mutex
	// mu guards groups and McastGroup.left; it is never held across a
	// wait, so Close's check and Groups do not wait for a join.
	mu     sync.Mutex
	groups map[netip.Addr]*McastGroup
}

// NewMulticast binds an RDMA_PS_UDP id to the local address local
// ("192.0.2.1", an address of the RDMA device's network interface; on
// RoCE it also picks the interface the groups are joined on) and creates
// the UD QP cfg describes. cfg.BeforeConnect must be nil: post receives
// before Join. The context bounds name resolution only.
func NewMulticast(ctx context.Context, local string, cfg UDConfig) (*Multicast, error) {
	if cfg.BeforeConnect != nil {
		return nil, &AttrError{Op: "NewMulticast", Field: "BeforeConnect", Reason: "a Multicast has no request to send: post receives before Join"}
	}
	if len(cfg.PrivateData) > 0 {
		return nil, &AttrError{Op: "NewMulticast", Field: "PrivateData", Reason: "a multicast join carries none"}
	}
	if err := cmp.Or(cfg.check("NewMulticast", 0), refuseLocalAddr("NewMulticast", cfg.LocalAddr)); err != nil {
		return nil, err
	}
	a, err := resolveAddr(ctx, local)
	if err != nil {
		return nil, err
	}
	ch, err := newCMChannel()
	if err != nil {
		return nil, err
	}
	m := &Multicast{local: a, groups: map[netip.Addr]*McastGroup{}}
	m.ch = ch
	fail := func(step string, err error) (*Multicast, error) {
		m.release(nil)
		return nil, fmt.Errorf("goverbs: multicast endpoint on %s: %s: %w", a, step, err)
	}
	if m.id, err = ch.create(createUDPID); err != nil {
		return fail("creating the id", err)
	}
	sa := sockaddrOf(netip.AddrPortFrom(a, 0))
	if err := rdmacm.BindAddr(m.id, sa.raw()); err != nil {
		return fail("binding", err)
	}
	if m.id.Verbs == nil {
		return fail("binding", fmt.Errorf("%s is on no RDMA device", a))
	}
	if err := m.setup(&cfg, "NewMulticast"); err != nil {
		return fail("creating the QP", err)
	}
	m.init("Multicast " + a.String())
	return m, nil
}

// resolveAddr parses an IP address, looking host up when it is not one.
func resolveAddr(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ap, err := resolveAddrPort(ctx, net.JoinHostPort(host, "0"))
	return ap.Addr(), err
}

// JoinOptions are how Multicast.Join joins a group.
type JoinOptions struct {
	// SendOnly joins as a send-only full member
	// (RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, through
	// rdma_join_multicast_ex): the QP may send to the group and receives
	// nothing from it. A librdmacm without rdma_join_multicast_ex, or a
	// kernel or device that cannot, fails the join with an error naming
	// it.
	SendOnly bool
}

// McastGroup is a multicast group a Multicast joined: its AH, QPN
// (McastQPN) and Q_Key, ready for SendWRs.SetUD.
type McastGroup struct {
	m        *Multicast
	addr     netip.Addr
	sendOnly bool
	ah       *AH
	qpn      uint32
	qkey     uint32
	left     bool // under m.mu
}

// Join joins the multicast group at group ("239.1.2.3"; for RoCE an IPv4
// or IPv6 multicast address) and waits for rdma_cm's answer
// (RDMA_CM_EVENT_MULTICAST_JOIN), which gives the group's address handle
// attributes, QPN and Q_Key; a full member's QP is then attached to the
// group. One Multicast joins any number of groups, one at a time. A
// refused join is a *CMEventError (RDMA_CM_EVENT_MULTICAST_ERROR); when
// ctx ends first, the join is undone.
func (m *Multicast) Join(ctx context.Context, group string, o JoinOptions) (*McastGroup, error) {
	if err := m.use(); err != nil {
		return nil, err
	}
	defer m.done()
	a, err := resolveAddr(ctx, group)
	if err != nil {
		return nil, err
	}
	if !a.IsMulticast() {
		return nil, &AttrError{Op: "Multicast.Join", Field: "group", Reason: a.String() + " is not a multicast address"}
	}
	if a.Is4() != m.local.Is4() {
		return nil, &AttrError{Op: "Multicast.Join", Field: "group", Reason: fmt.Sprintf("%s is not of the local address %s's family", a, m.local)}
	}
	m.joinMu.Lock()
	defer m.joinMu.Unlock()
	m.mu.Lock()
	_, joined := m.groups[a]
	m.mu.Unlock()
	if joined {
		return nil, &AttrError{Op: "Multicast.Join", Field: "group", Reason: a.String() + " is joined already"}
	}
	sa := sockaddrOf(netip.AddrPortFrom(a, 0))
	if o.SendOnly {
		var pin runtime.Pinner
		pin.Pin(&sa)
		attr := rdmacm.CMJoinMcAttrEx{
			CompMask:  rdmacm.CMJoinMcAttrAddress | rdmacm.CMJoinMcAttrJoinFlags,
			JoinFlags: rdmacm.McJoinFlagSendonlyFullmember,
			Addr:      sa.raw(),
		}
		err = rdmacm.JoinMulticastEx(m.id, &attr, nil)
		if err != nil {
			err = fmt.Errorf("join as a send-only full member: %w", err)
		}
		pin.Unpin()
	} else {
		err = rdmacm.JoinMulticast(m.id, sa.raw(), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("goverbs: join %s: %w", a, err)
	}
	g := &McastGroup{m: m, addr: a, sendOnly: o.SendOnly}
	for {
		ev, err := m.ch.next(ctx)
		if err == nil && ev.typ == rdmacm.CMEventMulticastError {
			err = withCause(ctx, &CMEventError{Op: "rdma_join_multicast", Event: ev.typ, Status: ev.status})
		}
		if err != nil {
			// Undo the join: the event may yet come, and librdmacm keeps
			// the group until it is left.
			rdmacm.LeaveMulticast(m.id, sa.raw())
			return nil, fmt.Errorf("goverbs: join %s: %w", a, err)
		}
		if ev.typ != rdmacm.CMEventMulticastJoin {
			continue // ADDR_CHANGE, DEVICE_REMOVAL: a later send fails if they matter
		}
		if g.ah, err = m.pd.NewAHFromAttr(&ev.ud.AHAttr); err != nil {
			rdmacm.LeaveMulticast(m.id, sa.raw())
			return nil, fmt.Errorf("goverbs: join %s: %w", a, err)
		}
		g.qpn, g.qkey = ev.ud.QPNum, ev.ud.QKey
		m.mu.Lock()
		m.groups[a] = g
		m.mu.Unlock()
		return g, nil
	}
}

// Addr returns the group's address.
func (g *McastGroup) Addr() netip.Addr { return g.addr }

// SendOnly reports a send-only join.
func (g *McastGroup) SendOnly() bool { return g.sendOnly }

// AH returns the group's address handle, which Leave destroys.
func (g *McastGroup) AH() *AH { return g.ah }

// QPN returns the destination QPN of a send to the group: McastQPN.
func (g *McastGroup) QPN() uint32 { return g.qpn }

// QKey returns the group's Q_Key (UDPQKey on RDMA_PS_UDP).
func (g *McastGroup) QKey() uint32 { return g.qkey }

// Leave leaves the group (rdma_leave_multicast, which detaches the QP) and
// destroys its AH; sends to it must have completed. A second Leave returns
// ErrClosed.
func (g *McastGroup) Leave() error {
	m := g.m
	if err := m.use(); err != nil {
		return err
	}
	defer m.done()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leave(g)
}

// leave leaves g; the caller holds m.mu.
func (m *Multicast) leave(g *McastGroup) error {
	if g.left {
		return ErrClosed
	}
	g.left = true
	delete(m.groups, g.addr)
	sa := sockaddrOf(netip.AddrPortFrom(g.addr, 0))
	err := rdmacm.LeaveMulticast(m.id, sa.raw())
	return errors.Join(err, g.ah.Close())
}

// Groups returns the groups joined and not left.
func (m *Multicast) Groups() []*McastGroup {
	m.mu.Lock()
	defer m.mu.Unlock()
	gs := make([]*McastGroup, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	return gs
}

// Raw returns the struct rdma_cm_id, valid until Close.
func (m *Multicast) Raw() *rdmacm.CMID { return m.id }

// QP returns the UD QP, in RTS with the Q_Key UDPQKey.
func (m *Multicast) QP() *QP { return m.qp }

// PD returns the endpoint's protection domain (cfg.PD, or its own).
func (m *Multicast) PD() *PD { return m.pd }

// SendCQ returns the CQ of the QP's send queue.
func (m *Multicast) SendCQ() *CQ { return m.sendCQ }

// RecvCQ returns the CQ of the QP's receive queue.
func (m *Multicast) RecvCQ() *CQ { return m.recvCQ }

// Context returns librdmacm's device context the QP is on.
func (m *Multicast) Context() *Context { return m.ctx }

// Port returns the device port the QP is on: PD.NewAHFromWC's port.
func (m *Multicast) Port() int { return int(m.id.PortNum) }

// LocalAddr returns the address the endpoint is bound to.
func (m *Multicast) LocalAddr() netip.Addr { return m.local }

// Close leaves every group still joined, destroys the QP and the rdma_cm
// id, and closes the PD and CQ the Multicast made itself. It fails with a
// *BusyError, closing nothing, while MRs, AHs or other objects made on its
// own PD or CQ are open (the groups' AHs aside).
func (m *Multicast) Close() error {
	check := func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		var mine []*object
		for _, g := range m.groups {
			mine = append(mine, &g.ah.object)
		}
		return m.busyOwn(m.label, mine...)
	}
	return m.closeTearing(check, func() error {
		m.mu.Lock()
		var errs []error
		for _, g := range m.groups {
			errs = append(errs, m.leave(g))
		}
		m.mu.Unlock()
		return errors.Join(append(errs, m.release(nil))...)
	}, m.ch.fd.interrupt, m.ch.fd.undo)
}
