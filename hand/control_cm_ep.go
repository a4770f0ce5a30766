package hand

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// The rdma_create_ep path: librdmacm's "simple" API, where rdma_getaddrinfo
// describes the endpoint and rdma_create_ep makes the rdma_cm id and its QP
// in one call (client), or binds and keeps the QP attributes so that
// rdma_get_request makes each accepted connection's QP (server). Dial,
// Listen and Accept in control_cm.go are the other path (rdma_create_id,
// rdma_resolve_*, rdma_create_qp); both give the same Conn.
//
// What blocks. librdmacm's simple API is synchronous; this package drives
// it off the netpoller wherever librdmacm lets it:
//
//   - rdma_getaddrinfo is called with RAI_NUMERICHOST after the host name
//     was resolved in Go (honouring ctx), so it does no DNS lookup.
//   - rdma_create_ep on the client resolves the address and the route
//     itself, with librdmacm's fixed 2 s timeout each, blocking one OS
//     thread for up to about 4 s. DialEP runs it on a goroutine of its own
//     and returns ctx.Err() as soon as ctx ends; the abandoned call finishes
//     in the background and undoes what it made. Until it does, the PD and
//     CQs of the ConnConfig stay in use (their Close waits).
//   - Right after rdma_create_ep (client) or rdma_get_request (server), the
//     id is moved to the process's event channel, read on the netpoller
//     (rdma_migrate_id; control_cm_events.go), so rdma_connect, rdma_accept and everything later
//     return at once and their events are awaited with ctx.
//   - The listening id stays synchronous (rdma_get_request refuses any
//     other); its channel is made non-blocking and parked on the netpoller,
//     so EPListener.Accept holds no thread while it waits and honours ctx.

// checkEP refuses what the rdma_create_ep path cannot do with cfg.
func (cfg *ConnConfig) checkEP(op string) error {
	if cfg.StepTimeout != 0 {
		return &AttrError{Op: op, Field: "StepTimeout", Reason: "rdma_create_ep resolves the address and route with librdmacm's fixed 2 s each: bound the call with ctx, or use Dial"}
	}
	return cmp.Or(cfg.checkParams(op), checkLocalAddr(op, cfg.LocalAddr))
}

// checkAckTimeout refuses an ACK timeout exponent rdma_cm cannot take.
func (cfg *ConnConfig) checkAckTimeout(op string) error {
	if cfg.AckTimeout > 31 {
		return &AttrError{Op: op, Field: "AckTimeout", Reason: fmt.Sprintf("%d: at most 31 (a 5-bit exponent)", cfg.AckTimeout)}
	}
	return nil
}

// epResources are the PD and CQs a Conn's or an EPListener's QPs use: the
// ConnConfig's, or made on librdmacm's context for the device.
type epResources struct {
	ctx            *Context // a borrowed wrapper of librdmacm's context
	pd             *PD
	sendCQ, recvCQ *CQ
	cqCh           *CompChannel
	ownPD, ownCQ   bool
	attr           verbs.QPInitAttr
	objs           []*object // what the QPs depend on
}

// newEPResources makes what cfg leaves out on raw, with an own CQ of
// cqFactor times the queues' depth, and the QP attributes.
func newEPResources(raw *verbs.Context, cfg ConnConfig, cqFactor int, op string) (*epResources, error) {
	r := &epResources{ctx: cmContext(raw)}
	for _, o := range []struct {
		field string
		ctx   *Context
	}{{"PD", pdCtx(cfg.PD)}, {"SendCQ", cqCtx(cfg.SendCQ)}, {"RecvCQ", cqCtx(cfg.RecvCQ)}} {
		if o.ctx != nil && o.ctx.raw != raw {
			name := r.ctx.name
			r.close()
			return nil, &AttrError{Op: op, Field: o.field, Reason: fmt.Sprintf("is not from librdmacm's context for %s, which serves the address: make it from hand.CMContext(%q)", name, name)}
		}
	}
	caps := cfg.qpCaps()
	var err error
	r.pd = cfg.PD
	if r.pd == nil {
		if r.pd, err = r.ctx.AllocPD(); err != nil {
			return nil, errors.Join(err, r.close())
		}
		r.ownPD = true
	}
	r.sendCQ, r.recvCQ = cfg.SendCQ, cfg.RecvCQ
	if r.sendCQ == nil {
		if r.cqCh, err = r.ctx.NewCompChannel(); err != nil {
			return nil, errors.Join(err, r.close())
		}
		if r.sendCQ, err = r.ctx.NewCQ(max(caps.MaxSendWR+caps.MaxRecvWR, 1)*cqFactor, CQOptions{Channel: r.cqCh}); err != nil {
			return nil, errors.Join(err, r.close())
		}
		r.ownCQ = true
	}
	if r.recvCQ == nil {
		r.recvCQ = r.sendCQ
	}
	qcfg := QPConfig{Type: RC, SendCQ: r.sendCQ, RecvCQ: r.recvCQ, SRQ: cfg.SRQ, Caps: caps, SignalAll: cfg.SignalAll}
	if r.attr, r.objs, err = qcfg.initAttr(r.pd, op); err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

// close closes what newEPResources made, in reverse order.
func (r *epResources) close() error {
	var errs []error
	if r.ownCQ && r.sendCQ != nil {
		errs = append(errs, r.sendCQ.Close())
	}
	if r.cqCh != nil {
		errs = append(errs, r.cqCh.Close())
	}
	if r.ownPD && r.pd != nil {
		errs = append(errs, r.pd.Close())
	}
	errs = append(errs, r.ctx.Close())
	return errors.Join(errs...)
}

// busy reports user objects still on what the resources made for
// themselves (the Context wrapper, PD, CQ and completion channel): the
// QPs of accepted Conns among them.
func (r *epResources) busy(label string) error {
	return busyOwned(label, ownObjects(r.ctx, r.pd, r.ownPD, r.sendCQ, r.ownCQ, r.cqCh)...)
}

// cmDeviceFor returns librdmacm's context of the device that has the IP
// address a: the one an rdma_cm id bound to a uses.
func cmDeviceFor(a netip.Addr) (*verbs.Context, error) {
	e, err := sharedCMEvents()
	if err != nil {
		return nil, err
	}
	id, err := createID(e.raw)
	if err != nil {
		return nil, err
	}
	defer func() {
		rdmacm.DestroyID(id)
		// It has no mailbox (a bound id's events, ADDR_CHANGE and
		// DEVICE_REMOVAL, are not awaited): drop what came for it.
		e.unregister(id, nil)
	}()
	sa := sockaddrOf(netip.AddrPortFrom(a, 0))
	if err := rdmacm.BindAddr(id, sa.raw()); err != nil {
		return nil, fmt.Errorf("%w has the address %s: %w", ErrNoDevice, a, err)
	}
	if id.Verbs == nil {
		return nil, fmt.Errorf("%w has the address %s (rdma_bind_addr found none)", ErrNoDevice, a)
	}
	return id.Verbs, nil
}

// sourceFor returns the local address the kernel's routing picks for dst
// (a connected UDP socket sends nothing).
func sourceFor(dst netip.AddrPort) (netip.Addr, error) {
	if dst.Port() == 0 {
		dst = netip.AddrPortFrom(dst.Addr(), 9)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route to %s: %w", dst.Addr(), err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// DialEP connects to an rdma_cm listener at addr ("192.0.2.1:7471") the
// rdma_create_ep way: rdma_getaddrinfo, rdma_create_ep (id, address and
// route resolution and the QP in one call), cfg.BeforeConnect, then
// rdma_connect with cfg.PrivateData, waiting until the connection is
// established. The Conn is the same as Dial's: its QP, PD and CQs work
// with the fast paths, and its Close undoes everything.
//
// The device is the one that has the source address the kernel's routing
// picks for addr; cfg's PD and CQs, if given, must be from its CMContext.
// ctx bounds the whole call, but see "What blocks" above: a cancelled
// DialEP may leave rdma_create_ep finishing in the background for up to
// about 4 s. No listener at addr gives a *CMEventError matching
// syscall.ECONNREFUSED.
func DialEP(ctx context.Context, addr string, cfg ConnConfig) (*Conn, error) {
	if len(cfg.PrivateData) > maxConnectData {
		return nil, &AttrError{Op: "DialEP", Field: "PrivateData", Reason: fmt.Sprintf("%d bytes: at most %d", len(cfg.PrivateData), maxConnectData)}
	}
	if err := cfg.checkEP("DialEP"); err != nil {
		return nil, err
	}
	ap, err := resolveAddrPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	what := "dial " + ap.String() + " (rdma_create_ep path)"
	wrap := func(step string, err error) error {
		return fmt.Errorf("goverbs: %s: %s: %w", what, step, withCause(ctx, err))
	}
	src := cfg.LocalAddr
	if !src.IsValid() || src.Addr().IsUnspecified() {
		a, err := sourceFor(ap)
		if err != nil {
			return nil, wrap("finding the source address", err)
		}
		src = netip.AddrPortFrom(a, src.Port())
	}
	raw, err := cmDeviceFor(src.Addr())
	if err != nil {
		return nil, wrap("finding the device", err)
	}
	res, err := newEPResources(raw, cfg, 1, "DialEP")
	if err != nil {
		return nil, wrap("making the PD and CQ", err)
	}
	ai, err := getaddrinfo(ap, rdmacm.RaiNumerichost, src)
	if err != nil {
		return nil, wrap("rdma_getaddrinfo", errors.Join(err, res.close()))
	}
	ch, err := newCMChannel()
	if err != nil {
		rdmacm.Freeaddrinfo(ai)
		return nil, wrap("creating the event channel", errors.Join(err, res.close()))
	}
	release, err := useAll(res.objs...)
	if err != nil {
		rdmacm.Freeaddrinfo(ai)
		ch.close()
		return nil, wrap("creating the endpoint", errors.Join(err, res.close()))
	}

	// rdma_create_ep blocks: run it where an ended ctx need not wait.
	type result struct {
		id  *rdmacm.CMID
		err error
	}
	done := make(chan result, 1)
	attr := res.attr
	go func() {
		var id *rdmacm.CMID
		err := rdmacm.CreateEp(&id, ai, res.pd.raw, &attr)
		rdmacm.Freeaddrinfo(ai)
		done <- result{id, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				rdmacm.DestroyEp(r.id)
			}
			release()
			ch.close()
			res.close()
		}()
		return nil, wrap("creating the endpoint (rdma_create_ep)", ctx.Err())
	}
	if r.err != nil {
		release()
		ch.close()
		return nil, wrap("creating the endpoint", errors.Join(r.err, res.close()))
	}
	c := &Conn{id: r.id, ch: ch, ctx: res.ctx, pd: res.pd, sendCQ: res.sendCQ, recvCQ: res.recvCQ, cqCh: res.cqCh, ownPD: res.ownPD, ownCQ: res.ownCQ}
	c.qp = newQP(res.pd, r.id.QP, RC, &attr, r.id, res.objs)
	release()

	if cfg.AckTimeout != 0 {
		// Before rdma_connect: rdma_cm applies it when the REP arrives.
		if err := setAckTimeout(c.id, cfg.AckTimeout); err != nil {
			return nil, wrap("setting the ACK timeout", errors.Join(err, c.release()))
		}
	}
	// From here on the id is asynchronous, its events on the process's channel.
	if err := ch.adopt(c.id); err != nil {
		return nil, wrap("moving the id to an event channel", errors.Join(err, c.release()))
	}
	c.established() // rdma_create_ep resolved the route: both addresses are known
	if err := c.connect(ctx, cfg); err != nil {
		return nil, wrap("connecting", err)
	}
	return c, nil
}

// EPListener is an rdma_cm listener made with rdma_create_ep: the QP of each
// connection it accepts is made by rdma_get_request, on the listener's PD
// and CQs (ConnConfig's, or its own). Accepted Conns therefore share the
// listener's CQs; an own CQ has room for 8 connections' queues, so give
// bigger CQs in ConnConfig for more.
type EPListener struct {
	object
	res  *epResources
	cfg  ConnConfig
	id   *rdmacm.CMID
	fd   *pollFD
	addr netip.AddrPort
}

// ListenEP binds an rdma_cm listener to addr ("192.0.2.1:7471"; port 0
// picks one) the rdma_create_ep way: rdma_getaddrinfo with RAI_PASSIVE,
// rdma_create_ep (which binds, and keeps the PD and QP attributes), then
// rdma_listen with a backlog of 128. ctx bounds name resolution only.
//
// A wildcard address (":7471", "0.0.0.0:7471") needs cfg.PD (and CQs) from
// the CMContext of the device requests will come in on: the device is not
// known before they do.
func ListenEP(ctx context.Context, addr string, cfg ConnConfig) (*EPListener, error) {
	if len(cfg.PrivateData) > maxAcceptData {
		return nil, &AttrError{Op: "ListenEP", Field: "PrivateData", Reason: fmt.Sprintf("%d bytes: at most %d", len(cfg.PrivateData), maxAcceptData)}
	}
	if err := cmp.Or(cfg.checkEP("ListenEP"), refuseLocalAddr("ListenEP", cfg.LocalAddr)); err != nil {
		return nil, err
	}
	ap, err := resolveAddrPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	wrap := func(err error) error { return fmt.Errorf("goverbs: listen on %s (rdma_create_ep path): %w", ap, err) }
	var raw *verbs.Context
	switch {
	case !ap.Addr().IsUnspecified():
		if raw, err = cmDeviceFor(ap.Addr()); err != nil {
			return nil, wrap(err)
		}
	case cfg.PD != nil:
		raw = cfg.PD.ctx.raw
	default:
		// Without RDMA, say so rather than ask for a PD that cannot be made.
		ch, err := createEventChannel()
		if err != nil {
			return nil, wrap(err)
		}
		rdmacm.DestroyEventChannel(ch)
		return nil, &AttrError{Op: "ListenEP", Field: "PD", Reason: "required on a wildcard address (" + ap.String() + "): the device is not known before a request comes; make it from hand.CMContext"}
	}
	res, err := newEPResources(raw, cfg, 8, "ListenEP")
	if err != nil {
		return nil, wrap(err)
	}
	ai, err := getaddrinfo(ap, rdmacm.RaiPassive|rdmacm.RaiNumerichost, netip.AddrPort{})
	if err != nil {
		return nil, wrap(errors.Join(err, res.close()))
	}
	defer rdmacm.Freeaddrinfo(ai)
	// res.objs stay held from rdma_create_ep until the listener is their
	// child. They are released before res.close on a failure: closing an
	// object this goroutine holds would wait on itself for ever.
	release, err := useAll(res.objs...)
	if err != nil {
		return nil, wrap(errors.Join(err, res.close()))
	}
	l := &EPListener{res: res, cfg: cfg}
	attr := res.attr
	var id *rdmacm.CMID                                                // its own variable: see createID
	if err = rdmacm.CreateEp(&id, ai, res.pd.raw, &attr); err != nil { // passive: binds, does not block
		release()
		return nil, wrap(errors.Join(err, res.close()))
	}
	l.id = id
	if err = rdmacm.Listen(l.id, 128); err == nil {
		l.fd, err = newPollFD(l.id.Channel.FD, "rdma_event_channel")
	}
	if err != nil {
		rdmacm.DestroyEp(l.id)
		release()
		return nil, wrap(errors.Join(err, res.close()))
	}
	defer release()
	l.addr = srcAddr(l.id)
	// The listener keeps raw pointers to the PD and CQs for rdma_get_request:
	// the caller's cannot close while it lives.
	var parents []*object
	for _, o := range res.objs {
		if !(res.ownPD && o == &res.pd.object) && !(res.ownCQ && o == &res.sendCQ.object) {
			parents = append(parents, o)
		}
	}
	l.init("EPListener "+l.addr.String(), parents...)
	return l, nil
}

// Addr returns the address the listener is bound to, with the port it got.
func (l *EPListener) Addr() netip.AddrPort { return l.addr }

// Raw returns the listening struct rdma_cm_id, valid until Close.
func (l *EPListener) Raw() *rdmacm.CMID { return l.id }

// PD returns the PD the accepted connections' QPs are made on.
func (l *EPListener) PD() *PD { return l.res.pd }

// SendCQ and RecvCQ return the CQs the accepted connections share.
func (l *EPListener) SendCQ() *CQ { return l.res.sendCQ }
func (l *EPListener) RecvCQ() *CQ { return l.res.recvCQ }

// Accept waits for the next connection request and accepts it at once:
// GetRequest, then EPRequest.Accept, which runs the listener's
// ConnConfig.BeforeConnect before it sends the accept. A client that sends
// as soon as it is connected finds no receive posted unless that hook
// posted one; its send then waits on RNR retries, and fails when
// ConnConfig.RNRRetryCount is finite and runs out. Post the receives in
// BeforeConnect, or between GetRequest and EPRequest.Accept, as librdmacm's
// rdma_server does.
func (l *EPListener) Accept(ctx context.Context) (*Conn, error) {
	req, err := l.GetRequest(ctx)
	if err != nil {
		return nil, err
	}
	return req.Accept(ctx)
}

// EPRequest is a connection request an EPListener received, with its QP
// made (rdma_get_request) but not yet accepted: post its first receives on
// Conn (or in the listener's ConnConfig.BeforeConnect), then Accept,
// AcceptWithData or Reject it. Until then the client waits.
type EPRequest struct {
	l    *EPListener
	c    *Conn
	done bool
}

// GetRequest waits for the next connection request (rdma_get_request,
// which makes its QP on the listener's PD and CQs, in INIT: receives may be
// posted). The request's private data is its Conn's PeerPrivateData. It
// returns ctx.Err() when ctx ends first and ErrClosed when the listener is
// closed while it waits.
func (l *EPListener) GetRequest(ctx context.Context) (*EPRequest, error) {
	c, err := l.take(ctx)
	if err != nil {
		return nil, err
	}
	if l.cfg.AckTimeout != 0 {
		if err := setAckTimeout(c.id, l.cfg.AckTimeout); err != nil {
			reject(c.id, nil)
			return nil, c.fail("accept on "+l.addr.String(), err)
		}
	}
	return &EPRequest{l: l, c: c}, nil
}

// Conn is the connection the request becomes: its QP (Conn.QP) and rdma_cm
// id take receives now (RecvChain.PostRecv, RecvChain.PostRecvv); nothing
// may be sent before Accept returns it. Reject and a failed Accept close
// it; closing it first makes Accept and Reject return ErrClosed.
func (r *EPRequest) Conn() *Conn { return r.c }

// PrivateData returns what the client sent with the request.
func (r *EPRequest) PrivateData() []byte { return r.c.peerData }

// Accept accepts the request with the listener's ConnConfig.PrivateData and
// waits until the connection is established; AcceptWithData sends other
// private data. It runs the listener's ConnConfig.BeforeConnect first, on
// the request's Conn. On failure (the hook's included), or when ctx has
// ended already, it rejects the request and closes its Conn; after
// Conn.Close it returns ErrClosed.
func (r *EPRequest) Accept(ctx context.Context) (*Conn, error) {
	return r.AcceptWithData(ctx, r.l.cfg.PrivateData)
}

// AcceptWithData is Accept with data (at most 196 bytes) as the accept's
// private data in place of the listener's ConnConfig.PrivateData: what
// this connection alone is to learn, such as the rkey and address of a
// buffer made for it. (ConnRequest.Accept takes its ConnConfig, and so its
// PrivateData, per request.)
func (r *EPRequest) AcceptWithData(ctx context.Context, data []byte) (*Conn, error) {
	if r.done {
		return nil, ErrClosed
	}
	if len(data) > maxAcceptData {
		return nil, &AttrError{Op: "EPRequest.AcceptWithData", Field: "data", Reason: fmt.Sprintf("%d bytes: at most %d", len(data), maxAcceptData)}
	}
	r.done = true
	// Not c.established(): take named the Conn and read its addresses
	// already, before it was handed out, for once c is let go a Close may
	// free the id, and nothing may write what Close reads.
	if err := r.c.accept(ctx, r.l.cfg.BeforeConnect, data, r.l.cfg); err != nil {
		return nil, fmt.Errorf("goverbs: accept on %s: %w", r.l.addr, err)
	}
	return r.c, nil
}

// Reject refuses the request, sending data (at most 148 bytes) to the
// client, whose DialEP fails with a *CMEventError carrying it, and closes
// its Conn (a *BusyError, closing nothing, while objects made on the
// Conn's own Context live). After Conn.Close it returns ErrClosed.
func (r *EPRequest) Reject(data []byte) error {
	if r.done {
		return ErrClosed
	}
	if len(data) > maxRejectData {
		return &AttrError{Op: "EPRequest.Reject", Field: "data", Reason: fmt.Sprintf("%d bytes: at most %d", len(data), maxRejectData)}
	}
	ran, err := r.c.abandon(r.c.busyOwn, true, data)
	if !ran && err == nil {
		return ErrClosed // Conn.Close came first: the id is gone
	}
	r.done = ran
	return err
}

// abandon releases a Conn that is not connected, closing it, so that what
// the Conn freed is ErrClosed to every method, not reached (Conn.QP,
// Conn.Close, RecvChain.PostRecvv); when rejectReq, it first rejects the
// request with data, unless the accept was sent (see Conn.accepting).
// check runs first, as for Close; ran says whether the teardown ran (not if
// check failed, or the Conn was closed already). Its error is the
// rejection's and what could not be released.
func (c *Conn) abandon(check func() error, rejectReq bool, data []byte) (ran bool, err error) {
	err = c.closeTearing(check, func() error {
		ran = true
		var err error
		if rejectReq && !c.accepting.Load() {
			err = reject(c.id, data)
		}
		return errors.Join(err, c.release())
	}, c.ch.fd.interrupt, c.ch.fd.undo)
	return ran, err
}

// take gets the next request and makes its Conn, with the id moved to the
// process's event channel. It holds the listener until the Conn's QP is
// registered on the PD and CQs, so that Close sees it.
func (l *EPListener) take(ctx context.Context) (*Conn, error) {
	if err := l.use(); err != nil {
		return nil, err
	}
	defer l.done()
	id, data, err := l.getRequest(ctx)
	if err != nil {
		return nil, err
	}
	// rdma_get_request made the QP from a copy of the listener's attributes
	// and dropped the caps the provider granted into it: ask the QP.
	var granted verbs.QPAttr
	err = verbs.QueryQP(id.QP, &granted, verbs.QPAttrCap, &verbs.QPInitAttr{})
	var ch *cmChannel
	if err == nil {
		ch, err = newCMChannel()
	}
	if err == nil {
		if err = ch.adopt(id); err != nil {
			ch.close()
		}
	}
	if err != nil {
		reject(id, nil)
		rdmacm.DestroyEp(id)
		return nil, fmt.Errorf("goverbs: accept on %s: %w", l.addr, err)
	}
	res := l.res
	c := &Conn{id: id, ch: ch, peerData: data, pd: res.pd, sendCQ: res.sendCQ, recvCQ: res.recvCQ,
		ctx: cmContext(id.Verbs)}
	attr := res.attr
	attr.Cap = granted.Cap
	c.qp = newQP(res.pd, id.QP, RC, &attr, id, res.objs)
	c.established() // the addresses are the request's: the Conn is named before it is handed out
	return c, nil
}

// getRequest waits for a connection request and returns its new id (with
// its QP) and private data. The caller holds l.
func (l *EPListener) getRequest(ctx context.Context) (*rdmacm.CMID, []byte, error) {
	var id *rdmacm.CMID
	var failed error
	err := l.fd.wait(ctx, func() bool {
		for {
			var nid *rdmacm.CMID
			err := rdmacm.GetRequest(l.id, &nid)
			switch {
			case err == nil:
				id = nid
				return true
			case errors.Is(err, syscall.EAGAIN): // the channel is non-blocking: nothing pending
				return false
			}
			// librdmacm keeps the event it could not use in l.id.Event.
			ev := l.id.Event
			if ev == nil {
				failed = err
				return true
			}
			l.id.Event = nil
			typ, reqID := ev.Event, ev.ID
			rdmacm.ACKCMEvent(ev)
			if typ == rdmacm.CMEventConnectRequest && reqID != nil {
				// A request whose QP could not be made: refuse it.
				reject(reqID, nil)
				rdmacm.DestroyEp(reqID)
				failed = err
				return true
			}
			// Not a request (DEVICE_REMOVAL...): next event.
		}
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	if ev := id.Event; ev != nil {
		if p := ev.Param.Conn(); p.PrivateData != nil && p.PrivateDataLen > 0 {
			data = append([]byte(nil), unsafe.Slice((*byte)(p.PrivateData), p.PrivateDataLen)...)
		}
	}
	return id, data, nil
}

// Close stops listening and wakes an Accept waiting for a request with
// ErrClosed. It fails with a *BusyError, closing nothing, while accepted
// Conns or other objects use the PD or CQ the listener made itself.
func (l *EPListener) Close() error {
	return l.closeTearing(func() error { return l.res.busy(l.label) }, func() error {
		rdmacm.DestroyEp(l.id)
		l.fd.close()
		return l.res.close()
	}, l.fd.interrupt, l.fd.undo)
}

// getaddrinfo is rdma_getaddrinfo for ap over RC and RDMA_PS_TCP, with src
// (if valid) as the source address. The hints live in C memory: their
// ai_src_addr is a pointer, which Go memory passed to C may not hold.
func getaddrinfo(ap netip.AddrPort, flags int32, src netip.AddrPort) (*rdmacm.Addrinfo, error) {
	node, service := cString0(ap.Addr().String()), cString0(strconv.Itoa(int(ap.Port())))
	type hintsMem struct {
		hints rdmacm.Addrinfo
		src   sockaddrBuf
	}
	p, err := cmalloc(unsafe.Sizeof(hintsMem{}))
	if err != nil {
		return nil, err
	}
	defer cfree(p)
	m := (*hintsMem)(p)
	m.hints.AiFlags = flags
	m.hints.AiPortSpace = rdmacm.PsTCP
	m.hints.AiQPType = verbs.QPTRC
	if src.IsValid() {
		m.src = sockaddrOf(src)
		// The kernel wants the exact length of the family's sockaddr.
		m.hints.AiSrcLen = 28 // sizeof(struct sockaddr_in6)
		if src.Addr().Is4() {
			m.hints.AiSrcLen = 16 // sizeof(struct sockaddr_in)
		}
		m.hints.AiSrcAddr = m.src.raw()
	}
	var res *rdmacm.Addrinfo
	if err := rdmacm.Getaddrinfo(&node[0], &service[0], &m.hints, &res); err != nil {
		return nil, err
	}
	if res == nil {
		return nil, siteGetaddrinfo.Err(syscall.ENODATA)
	}
	return res, nil
}

// cString0 is s NUL-terminated, in Go memory: C may read it during a call.
func cString0(s string) []int8 {
	b := make([]int8, len(s)+1)
	for i := 0; i < len(s); i++ {
		b[i] = int8(s[i])
	}
	return b
}
