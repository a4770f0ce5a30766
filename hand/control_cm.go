package hand

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/verberr"
)

// rdma_cm: connection setup over IP addresses (librdmacm), with the event
// channel on the netpoller.
//
// The server listens (Listen), takes connection requests (Listener.Accept),
// and accepts (ConnRequest.Accept) or rejects them; the client dials (Dial).
// Both sides get a Conn: an RC QP in RTS that librdmacm connected, with the
// PD and CQ it uses. Every id is on the process's one event channel, whose
// reader hands each event to its id's own queue (control_cm_events.go), so
// one connection's events never wait behind another's.
//
// A PD, CQ or MR for a Conn must come from librdmacm's own device context
// (rdma_cm refuses a PD of another ibv_context, even for the same device):
// CMContext, Listener.Context or ConnRequest.Context. Without one, the Conn
// makes its own PD and CQ (Conn.PD, Conn.SendCQ, Conn.RecvCQ), which it
// closes.

// CMContext returns the device context librdmacm uses for the device called
// name ("" for the first): PDs, CQs and MRs made from it can back rdma_cm
// connections on that device. librdmacm keeps the device open: Close only
// marks this handle closed (after its PDs and CQs), and a handle may as
// well be dropped without it. Listener.Context, ConnRequest.Context and
// Conn.Context return such handles too.
func CMContext(name string) (*Context, error) {
	var found *Context
	var names []string
	err := cmDevices(func(raw *verbs.Context) bool {
		n := cString(raw.Device.Name[:])
		if name == "" || n == name {
			found = newContext(raw, n, true)
			return true
		}
		names = append(names, n)
		return false
	})
	switch {
	case err != nil:
		return nil, err
	case found == nil:
		return nil, fmt.Errorf("%w named %q for rdma_cm (found: %v)", ErrNoDevice, name, names)
	}
	return found, nil
}

// cmDevices calls match with each of librdmacm's device contexts
// (rdma_get_devices), in order, until it returns true. No device at all is
// an error matching ErrNoDevice that says what to do.
func cmDevices(match func(raw *verbs.Context) bool) error {
	if err := rdmacm.Load(); err != nil {
		return err // rdma-core is not installed: the error says what to install
	}
	var n int32
	list, err := rdmacm.GetDevices(&n)
	switch {
	case errors.Is(err, verberr.ErrNoRDMA):
		// librdmacm's ENODEV: no device, or no RDMA in the kernel; the
		// error says which and what to do.
		return fmt.Errorf("%w: %w", ErrNoDevice, err)
	case err != nil:
		return err
	case n == 0:
		rdmacm.FreeDevices(list)
		return fmt.Errorf("%w: rdma_get_devices found none %s", ErrNoDevice, loadDriverHint)
	}
	defer rdmacm.FreeDevices(list)
	for _, raw := range unsafe.Slice(list, int(n)) {
		if match(raw) {
			return nil
		}
	}
	return nil
}

// ConnConfig describes the QP and the connection parameters of a
// connection, on both of rdma_cm's paths: Dial and ConnRequest.Accept
// (rdma_create_id), DialEP and ListenEP (rdma_create_ep, where ListenEP's
// applies to every connection it accepts). Every field means the same on
// both, but for StepTimeout, which only Dial can honour, and LocalAddr,
// which only the dialling side has.
type ConnConfig struct {
	// PD, SendCQ and RecvCQ, when set, must come from the route's device
	// context (see CMContext). A nil PD makes the Conn allocate its own; a
	// nil SendCQ makes it create one CQ, with a completion channel, for
	// both directions (RecvCQ nil means SendCQ).
	PD             *PD
	SendCQ, RecvCQ *CQ
	SRQ            *SRQ
	Caps           QPCaps // 0 means 16 WRs and 1 SGE each way
	SignalAll      bool

	// PrivateData goes to the peer with the request (at most 56 bytes) or
	// the accept (at most 196 bytes). The transport pads it with zeros.
	// ListenEP's goes with every accept but EPRequest.AcceptWithData's.
	PrivateData []byte
	// RDMA reads and atomics the peer may have outstanding at this side
	// (ResponderResources) and this side at the peer (InitiatorDepth);
	// 0 means 16, or the device maximum if lower.
	ResponderResources, InitiatorDepth int
	// Transport and RNR retries, 0 to 7 (7 RNR retries mean forever); 0
	// means 6 and 7 (see RTSAttr), NoRetry none.
	RetryCount, RNRRetryCount int
	// AckTimeout is the QP's local ACK timeout, 4.096 us * 2^AckTimeout
	// (rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT): with RetryCount it
	// bounds how long a send to a dead peer takes to fail with
	// IBV_WC_RETRY_EXC_ERR, about (RetryCount+1) timeouts. 0 leaves
	// rdma_cm's choice, derived from the path's packet lifetime; at most
	// 31.
	AckTimeout uint8
	// BeforeConnect, when set, is called with the Conn once its QP exists
	// and takes receives, before the peer can send on it: ConnRequest.Accept
	// and ListenEP's accepts call it before they send the accept, Dial and
	// DialEP before they send the connect request. Post the first receives
	// there (RecvChain.PostRecvv on c, PostRecv on c.QP(), or PostSRQRecv on
	// the SRQ), so that the peer's first send finds one even with
	// RNRRetryCount NoRetry. The Conn is not connected yet: do not post
	// sends, and PeerPrivateData is not known yet on Dial's side. An error
	// from it ends the attempt (Accept rejects the request, Dial gives up),
	// closes the Conn and is returned; close what it made on the Conn's own
	// PD first, or that PD cannot be freed.
	BeforeConnect func(c *Conn) error
	// AfterFailure, when set, is called with the Conn when Dial,
	// Conn.Connect or ConnRequest.Accept fails after BeforeConnect has
	// returned nil (the peer refused, the context ended, the connection
	// never came up), before the Conn closes: close there what
	// BeforeConnect made on the Conn's own PD (MRs), which cannot be freed
	// while they are open. A BeforeConnect that fails cleans up after
	// itself.
	AfterFailure func(c *Conn)
	// StepTimeout bounds address and route resolution each; 0 means 2 s.
	// The context's deadline, if nearer, ends the dial on its own. Dial
	// only: rdma_create_ep resolves with librdmacm's fixed 2 s, and DialEP
	// and ListenEP refuse a non-zero StepTimeout.
	StepTimeout time.Duration
	// LocalAddr is the client's source address (Dial, NewConn's
	// ResolveAddr, DialEP): an address of the RDMA device's network
	// interface, which the listener then sees as the client's
	// (ConnRequest.RemoteAddr). The zero AddrPort means any address, as
	// the route to the peer picks; port 0 picks a port. The listening
	// side has its listener's address: Accept and ListenEP refuse it.
	LocalAddr netip.AddrPort
}

// refuseLocalAddr refuses a LocalAddr (local) on the listening side.
func refuseLocalAddr(op string, local netip.AddrPort) error {
	if local != (netip.AddrPort{}) {
		return &AttrError{Op: op, Field: "LocalAddr", Reason: fmt.Sprintf("%s: the listener's address is the local one; LocalAddr is the dialling side's", local)}
	}
	return nil
}

// checkLocalAddr refuses a LocalAddr (local) with a port and no address.
func checkLocalAddr(op string, local netip.AddrPort) error {
	if local != (netip.AddrPort{}) && !local.IsValid() {
		return &AttrError{Op: op, Field: "LocalAddr", Reason: fmt.Sprintf("port %d with no address: give 0.0.0.0:%d for that port on any address", local.Port(), local.Port())}
	}
	return nil
}

// sourceSockaddr is rdma_resolve_addr's src_addr for local, in buf: nil
// (any) for the zero AddrPort.
func sourceSockaddr(local netip.AddrPort, buf *sockaddrBuf) *rdmacm.Sockaddr {
	if !local.IsValid() {
		return nil
	}
	*buf = sockaddrOf(local)
	return buf.raw()
}

const (
	maxConnectData = 56  // REQ private data after rdma_cm's header
	maxAcceptData  = 196 // REP private data
	maxRejectData  = 148 // REJ private data
)

// CMEventError is a connection attempt that ended with an rdma_cm event
// other than the one expected: a reject, an unreachable peer, an address or
// route that did not resolve. It matches ECONNREFUSED (rejected: no
// listener, or the listener said no), ETIMEDOUT or EHOSTUNREACH
// (unreachable), or the errno the event's status carries.
type CMEventError struct {
	Op          string // what was being done: "rdma_connect", "rdma_resolve_addr"...
	Event       CMEventType
	Status      int32  // the event's status: a negative errno, or an IB CM reject reason
	PrivateData []byte // a reject's private data, padded to the transport's size
}

// IB CM reject reasons (IBTA 12.6.7.2) seen in a REJECTED event's status.
const (
	rejInvalidServiceID = 8  // nobody listens on that port
	rejConsumer         = 28 // the listener called rdma_reject
)

func (e *CMEventError) Error() string {
	s := e.Op + ": " + cmEventName(e.Event)
	switch {
	case e.Event == rdmacm.CMEventRejected && e.Status == rejInvalidServiceID:
		s += " (no listener at that address and port)"
	case e.Event == rdmacm.CMEventRejected && e.Status == rejConsumer:
		s += " (rejected by the listener)"
	case e.Event == rdmacm.CMEventDisconnected && e.Status == -int32(syscall.ETIMEDOUT):
		s += " (the peer never answered the disconnect request: it is gone or unreachable)"
	case e.Status < 0:
		s += " (" + syscall.Errno(-e.Status).Error() + ")"
	default:
		s += " (status " + strconv.Itoa(int(e.Status)) + ")"
	}
	return s
}

// Unwrap returns the errno the event stands for.
func (e *CMEventError) Unwrap() error {
	switch {
	case e.Event == rdmacm.CMEventRejected:
		return syscall.ECONNREFUSED
	case e.Status < 0:
		return syscall.Errno(-e.Status)
	case e.Event == rdmacm.CMEventUnreachable:
		return syscall.EHOSTUNREACH
	}
	return syscall.ECONNABORTED
}

func cmEventName(t rdmacm.CMEventType) string { return goString(rdmacm.EventStr(t)) }

// cmEvent is a copy of an acknowledged struct rdma_cm_event.
type cmEvent struct {
	typ      rdmacm.CMEventType
	status   int32
	id       *rdmacm.CMID // the request's new id, for a CONNECT_REQUEST
	data     []byte
	listenID *rdmacm.CMID
	ud       rdmacm.UDParam // RDMA_PS_UDP: the peer's or group's address, QPN and Q_Key; PrivateData nil
	ch       *cmChannel     // a CONNECT_REQUEST's: the new id's mailbox
}

// createEventChannel is rdma_create_event_channel, the first rdma_cm call
// of Listen, Dial and their EP forms: on a host without RDMA it is the one
// that fails (librdmacm's ENODEV), and the error then wraps ErrNoDevice, as
// Open's does, and says what to do.
func createEventChannel() (*rdmacm.EventChannel, error) {
	raw, err := rdmacm.CreateEventChannel()
	switch {
	case errors.Is(err, verberr.ErrNoRDMA):
		return nil, &noDeviceError{err}
	case err != nil:
		return nil, err
	}
	return raw, nil
}

// noDeviceError is a failure that means no RDMA device, inside a message
// that already says "goverbs: " and what was being done: it matches
// ErrNoDevice without repeating that prefix.
type noDeviceError struct{ err error }

func (e *noDeviceError) Error() string        { return "no RDMA device: " + e.err.Error() }
func (e *noDeviceError) Unwrap() error        { return e.err }
func (e *noDeviceError) Is(target error) bool { return target == ErrNoDevice }

// withCause adds the context's error to err when the context has ended: a
// step can fail just as its context ends, and the context is then the cause
// (errors.Is(err, context.DeadlineExceeded) holds).
func withCause(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return err
}

// Listener waits for rdma_cm connection requests on an address.
type Listener struct{ cmListener }

// cmListener is what Listener and UDListener share: a listening rdma_cm id
// and its mailbox on the process's event channel.
type cmListener struct {
	object
	ch   *cmChannel
	id   *rdmacm.CMID
	addr netip.AddrPort
	// The device context librdmacm bound the id to, nil on a wildcard
	// address: read at listen, for Close frees the id.
	verbs *verbs.Context
}

// Listen binds an rdma_cm listener to addr ("192.0.2.1:7471"; a port of 0
// picks one, see Addr) with a backlog of 128 requests. The context bounds
// name resolution only.
func Listen(ctx context.Context, addr string) (*Listener, error) {
	l := &Listener{}
	if err := l.listen(ctx, addr, "listen", "Listener", createID); err != nil {
		return nil, err
	}
	return l, nil
}

// listen binds l to addr, on an id that create makes on the process's
// channel, with a backlog of 128 requests. op names the call in its
// errors, kind the object in its name.
func (l *cmListener) listen(ctx context.Context, addr, op, kind string, create func(*rdmacm.EventChannel) (*rdmacm.CMID, error)) error {
	ap, err := resolveAddrPort(ctx, addr)
	if err != nil {
		return err
	}
	ch, err := newCMChannel()
	if err != nil {
		return fmt.Errorf("goverbs: %s on %s: %w", op, ap, err)
	}
	l.ch = ch
	fail := func(err error) error {
		if l.id != nil {
			rdmacm.DestroyID(l.id)
		}
		ch.close()
		return fmt.Errorf("goverbs: %s on %s: %w", op, ap, err)
	}
	if l.id, err = ch.create(create); err != nil {
		return fail(err)
	}
	sa := sockaddrOf(ap)
	if err := rdmacm.BindAddr(l.id, sa.raw()); err != nil {
		return fail(err)
	}
	if err := rdmacm.Listen(l.id, 128); err != nil {
		return fail(err)
	}
	l.addr = srcAddr(l.id)
	l.verbs = l.id.Verbs
	l.init(kind + " " + l.addr.String())
	return nil
}

// cmContext is a Context handle on raw, a device context of librdmacm's,
// which keeps it open for the process: it outlives the ids bound to it.
func cmContext(raw *verbs.Context) *Context {
	return newContext(raw, cString(raw.Device.Name[:]), true)
}

// Addr returns the address the listener is bound to, with the port it got.
func (l *cmListener) Addr() netip.AddrPort { return l.addr }

// Raw returns the listening struct rdma_cm_id, valid until Close.
func (l *cmListener) Raw() *rdmacm.CMID { return l.id }

// Context returns librdmacm's device context for the listener's address
// (see CMContext), or nil when it listens on a wildcard address; use the
// request's Context then.
func (l *cmListener) Context() *Context {
	if l.verbs == nil {
		return nil
	}
	return cmContext(l.verbs)
}

// Close stops listening and wakes an Accept with ErrClosed. Accepted
// connections and requests Accept returned are unaffected; requests that
// came and were not taken are rejected. A failed rdma_destroy_id is
// returned, with the listener closed all the same: its events no longer
// reach it.
func (l *cmListener) Close() error {
	return l.closeTearing(func() error { return nil }, func() error {
		err := rdmacm.DestroyID(l.id)
		l.ch.close()
		return err
	}, l.ch.fd.interrupt, l.ch.fd.undo)
}

// ConnRequest is a connection request a Listener received. Accept or Reject
// it; until then the client waits.
type ConnRequest struct {
	id   *rdmacm.CMID
	ch   *cmChannel
	data []byte
	done bool
	// Read when the request came: Reject, a failed Accept and the Conn's
	// Close free the id.
	remote netip.AddrPort
	verbs  *verbs.Context
}

// Accept waits for the next connection request. It returns ctx.Err() when
// ctx ends first and ErrClosed when the Listener is closed.
func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error) {
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
			continue // DEVICE_REMOVAL
		}
		// The request's id has its own mailbox (ev.ch), where its
		// connection's events queue.
		return &ConnRequest{id: ev.id, ch: ev.ch, data: ev.data, remote: dstAddr(ev.id), verbs: ev.id.Verbs}, nil
	}
}

// PrivateData returns what the client sent with the request, padded with
// zeros to the transport's size (56 bytes).
func (r *ConnRequest) PrivateData() []byte { return r.data }

// RemoteAddr returns the client's address.
func (r *ConnRequest) RemoteAddr() netip.AddrPort { return r.remote }

// Context returns librdmacm's device context the request came in on: make
// the PD, CQs and MRs for its ConnConfig from it.
func (r *ConnRequest) Context() *Context {
	return cmContext(r.verbs)
}

// Reject refuses the request, sending data (at most 148 bytes) to the
// client, whose Dial fails with a *CMEventError carrying it.
func (r *ConnRequest) Reject(data []byte) error {
	if r.done {
		return ErrClosed
	}
	if len(data) > maxRejectData {
		return &AttrError{Op: "ConnRequest.Reject", Field: "data", Reason: fmt.Sprintf("%d bytes: at most %d", len(data), maxRejectData)}
	}
	r.done = true
	err := reject(r.id, data)
	rdmacm.DestroyID(r.id)
	r.ch.close()
	return err
}

// Accept creates the QP cfg describes, runs cfg.BeforeConnect (post the
// first receives there), accepts the request with cfg.PrivateData and
// waits until the connection is established. cfg is per request: its
// PrivateData may carry what this connection alone is to learn, such as
// the rkey of a buffer registered for it on a PD from r.Context() (cfg.PD).
// With ctx ended already, it rejects the request instead, accepting
// nothing. A cfg it cannot carry (*AttrError: caps, depths, retry counts,
// private data) is refused before anything is made, and the request stays
// pending for another Accept or a Reject.
func (r *ConnRequest) Accept(ctx context.Context, cfg ConnConfig) (*Conn, error) {
	if r.done {
		return nil, ErrClosed
	}
	if len(cfg.PrivateData) > maxAcceptData {
		return nil, &AttrError{Op: "ConnRequest.Accept", Field: "PrivateData", Reason: fmt.Sprintf("%d bytes: at most %d", len(cfg.PrivateData), maxAcceptData)}
	}
	if err := cmp.Or(cfg.checkParams("ConnRequest.Accept"), refuseLocalAddr("ConnRequest.Accept", cfg.LocalAddr)); err != nil {
		return nil, err
	}
	r.done = true
	if err := ctx.Err(); err != nil {
		// Rejected without accepting first, as EPRequest.Accept does: an
		// accepted, then torn-down id waits out TIMEWAIT in rdma_destroy_id.
		reject(r.id, nil)
		rdmacm.DestroyID(r.id)
		r.ch.close()
		return nil, fmt.Errorf("goverbs: accept: %w", err)
	}
	c := &Conn{id: r.id, ch: r.ch, peerData: r.data}
	if err := c.setup(cfg, "ConnRequest.Accept"); err != nil {
		reject(r.id, nil)
		return nil, c.fail("accept", err)
	}
	// Named before the hook sees it: from here on a failure closes the
	// Conn (abandon), so that one the hook kept reads ErrClosed.
	c.established()
	if err := c.accept(ctx, cfg.BeforeConnect, cfg.PrivateData, cfg); err != nil {
		return nil, fmt.Errorf("goverbs: accept: %w", err)
	}
	return c, nil
}

// beforeConnect runs hook, if any, on c, which is named and not held: the
// hook may post receives and may close it. A failure closes c, rejecting
// the request first when reject.
func (c *Conn) beforeConnect(hook func(*Conn) error, rejectReq bool) error {
	if hook == nil {
		return nil
	}
	if err := hook(c); err != nil {
		_, left := c.abandon(func() error { return nil }, rejectReq, nil)
		return errors.Join(fmt.Errorf("BeforeConnect: %w", err), left)
	}
	return nil
}

// accept runs the hook, accepts the request on c's id with data as the
// private data (cfg gives the rest of the parameters) and waits for the
// connection to be established. c is held from the accept on, so that a
// Close meanwhile interrupts the wait and tears down after it. A failure
// closes c (rejecting the request unless the accept was sent: see
// Conn.accepting).
func (c *Conn) accept(ctx context.Context, hook func(*Conn) error, data []byte, cfg ConnConfig) error {
	if err := c.beforeConnect(hook, true); err != nil {
		return err
	}
	// Held while it accepts: a Conn.Close before it has freed the id.
	if err := c.use(); err != nil {
		return err
	}
	var pin runtime.Pinner
	param, err := c.param(cfg, data, &pin)
	if err == nil {
		// An ended ctx rejects without accepting first: a connection
		// accepted, then torn down, holds its rdma_cm id in the kernel's
		// TIMEWAIT, and rdma_destroy_id waits that out (a minute on rxe).
		err = ctx.Err()
	}
	if err == nil {
		err = rdmacm.Accept(c.id, &param)
	}
	pin.Unpin()
	if err == nil {
		c.accepting.Store(true) // before done: a Close tearing down reads it
		if _, err = c.ch.expect(ctx, "rdma_accept", rdmacm.CMEventEstablished); err == nil {
			c.accepting.Store(false)
		}
	}
	c.done()
	if err != nil {
		if cfg.AfterFailure != nil {
			cfg.AfterFailure(c)
		}
		_, left := c.abandon(func() error { return nil }, true, nil)
		return errors.Join(err, left)
	}
	return nil
}

// connect runs the hook on a dialling c, named, then sends the connect
// request with cfg's parameters and waits for the connection to be
// established, holding c as accept does. A failure closes c.
func (c *Conn) connect(ctx context.Context, cfg ConnConfig) error {
	if err := c.beforeConnect(cfg.BeforeConnect, false); err != nil {
		return err
	}
	if err := c.use(); err != nil {
		return err
	}
	var pin runtime.Pinner
	param, err := c.param(cfg, cfg.PrivateData, &pin)
	if err == nil {
		err = rdmacm.Connect(c.id, &param)
	}
	pin.Unpin()
	if err == nil {
		var ev cmEvent
		if ev, err = c.ch.expect(ctx, "rdma_connect", rdmacm.CMEventEstablished); err == nil {
			c.peerData = ev.data
		}
	}
	c.done()
	if err != nil {
		if cfg.AfterFailure != nil {
			cfg.AfterFailure(c)
		}
		_, left := c.abandon(func() error { return nil }, false, nil)
		return errors.Join(err, left)
	}
	return nil
}

// Conn is an rdma_cm connection: an RC QP in RTS, its PD and CQs, and the
// struct rdma_cm_id (Raw) that the rdma_post_*v fast paths take. Dial,
// ConnRequest.Accept and the rdma_create_ep path return it established;
// NewConn returns one that its steps then connect.
type Conn struct {
	object
	id       *rdmacm.CMID
	ch       *cmChannel
	ctx      *Context
	pd       *PD
	sendCQ   *CQ
	recvCQ   *CQ
	qp       *QP
	cqCh     *CompChannel // made with an own CQ
	ownPD    bool
	ownCQ    bool
	peerData []byte
	local    netip.AddrPort
	remote   netip.AddrPort

	// accepting: rdma_accept was sent and ESTABLISHED has not come. A
	// teardown then destroys the id with no rdma_reject or rdma_disconnect
	// first: after either, on an id accepted but not established,
	// rdma_destroy_id waited 69 s on rxe (the guest logging
	// cm_destroy_id_wait_timeout, the id in TIMEWAIT), so an Accept whose
	// client stalled did not return when its context ended, nor a Close
	// meanwhile. rdma_destroy_id alone returns at once and rejects the
	// connection itself.
	accepting     atomic.Bool
	disconnecting atomic.Bool // rdma_disconnect was called
	disconnected  atomic.Bool // the DISCONNECTED event came
	disconnectErr error       // how it came, when not from the peer; set before disconnected

	steps *connSteps // NewConn's progress; nil on a Conn Accept or the EP path made
}

// Dial connects to an rdma_cm listener at addr ("192.0.2.1:7471"):
// resolves the address (from cfg.LocalAddr, when set) and the route,
// creates the QP cfg describes on the device the route goes through, runs
// cfg.BeforeConnect (post the first receives there), sends the request
// with cfg.PrivateData and waits until the connection is established.
// Every step honours ctx. A listener that rejects, or no listener at all,
// gives a *CMEventError matching syscall.ECONNREFUSED.
//
// Dial is NewConn and its steps in one call; call them yourself to time
// them, or to act between them.
func Dial(ctx context.Context, addr string, cfg ConnConfig) (*Conn, error) {
	if err := cfg.checkDial("Dial"); err != nil {
		return nil, err
	}
	ap, err := resolveAddrPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	what := "dial " + ap.String()
	c, err := newConn(cfg)
	if err != nil {
		return nil, fmt.Errorf("goverbs: %s: %w", what, withCause(ctx, err))
	}
	for _, s := range []struct {
		step connStep
		what string
		do   func() error
		ok   func()
	}{
		{stepResolveAddr, "resolving the address", func() error { return c.resolveAddr(ctx, ap) }, nil},
		{stepResolveRoute, "resolving the route", func() error { return c.resolveRoute(ctx) }, c.established},
		{stepCreateQP, "creating the QP", func() error { return c.setup(cfg, "Dial") }, nil},
	} {
		if err := c.runStep(ctx, s.step, what+": "+s.what, s.do, s.ok); err != nil {
			c.release() // no one else has c
			return nil, err
		}
	}
	err = c.beginConnect()
	if err == nil {
		err = c.connectStep(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("goverbs: %s: connecting: %w", what, withCause(ctx, err))
	}
	return c, nil
}

// stepTimeout is the timeout in ms for one resolution step.
//
// It is not cut to the context's deadline: the kernel's timer would then
// race the context's own, and a resolution ended by the deadline would be
// reported as a resolution error. The context ends the wait instead, and
// destroying the id cancels the resolution.
func stepTimeout(d time.Duration) int {
	if d <= 0 {
		d = 2 * time.Second
	}
	return max(int(d/time.Millisecond), 1)
}

// setup makes the Conn's context wrapper, its PD and CQs when cfg has none,
// and the QP (rdma_create_qp).
func (c *Conn) setup(cfg ConnConfig, op string) error {
	raw := c.id.Verbs
	c.ctx = cmContext(raw)
	for _, o := range []struct {
		field string
		ctx   *Context
	}{{"PD", pdCtx(cfg.PD)}, {"SendCQ", cqCtx(cfg.SendCQ)}, {"RecvCQ", cqCtx(cfg.RecvCQ)}} {
		if o.ctx != nil && o.ctx.raw != raw {
			return &AttrError{Op: op, Field: o.field, Reason: fmt.Sprintf("is not from librdmacm's context for %s, where the route goes: make it from hand.CMContext(%q) or the request's Context()", c.ctx.name, c.ctx.name)}
		}
	}
	var err error
	c.pd = cfg.PD
	if c.pd == nil {
		if c.pd, err = c.ctx.AllocPD(); err != nil {
			return err
		}
		c.ownPD = true
	}
	caps := cfg.qpCaps()
	c.sendCQ, c.recvCQ = cfg.SendCQ, cfg.RecvCQ
	if c.sendCQ == nil {
		if c.cqCh, err = c.ctx.NewCompChannel(); err != nil {
			return err
		}
		if c.sendCQ, err = c.ctx.NewCQ(max(caps.MaxSendWR+caps.MaxRecvWR, 1), CQOptions{Channel: c.cqCh}); err != nil {
			return err
		}
		c.ownCQ = true
	}
	if c.recvCQ == nil {
		c.recvCQ = c.sendCQ
	}
	if cfg.AckTimeout != 0 {
		// Before the QP reaches RTS, where rdma_cm applies it: in
		// rdma_accept on the server, on the REP's arrival on the client.
		if err := setAckTimeout(c.id, cfg.AckTimeout); err != nil {
			return err
		}
	}
	qcfg := QPConfig{Type: RC, SendCQ: c.sendCQ, RecvCQ: c.recvCQ, SRQ: cfg.SRQ, Caps: caps, SignalAll: cfg.SignalAll}
	attr, objs, err := qcfg.initAttr(c.pd, op)
	if err != nil {
		return err
	}
	release, err := useAll(objs...)
	if err != nil {
		return err
	}
	defer release()
	if err := rdmacm.CreateQP(c.id, c.pd.raw, &attr); err != nil {
		return err
	}
	c.qp = newQP(c.pd, c.id.QP, RC, &attr, c.id, objs)
	return nil
}

func pdCtx(pd *PD) *Context {
	if pd == nil {
		return nil
	}
	return pd.ctx
}

func cqCtx(cq *CQ) *Context {
	if cq == nil {
		return nil
	}
	return cq.ctx
}

// qpCaps is cfg.Caps, or 16 WRs each way when it asks for none.
func (cfg *ConnConfig) qpCaps() QPCaps {
	caps := cfg.Caps
	if caps.MaxSendWR == 0 && caps.MaxRecvWR == 0 {
		caps.MaxSendWR, caps.MaxRecvWR = 16, 16
	}
	return caps
}

// checkParams refuses, before anything is made, caps struct ibv_qp_cap
// cannot hold and what struct rdma_conn_param and the ACK timeout option
// cannot carry: a negative ResponderResources or InitiatorDepth (param
// makes more than 255 into 255), a retry count other than 0 to 7 or
// NoRetry, as RTSAttr's, and an ACK timeout exponent over 31.
func (cfg *ConnConfig) checkParams(op string) error {
	depth := func(field string, v int) error {
		if v < 0 {
			return &AttrError{Op: op, Field: field, Reason: fmt.Sprintf("%d: must be 0 or more", v)}
		}
		return nil
	}
	retry := func(field string, v int) error {
		if v != NoRetry && (v < 0 || v > 7) {
			return &AttrError{Op: op, Field: field, Reason: fmt.Sprintf("%d: 0 to 7, or NoRetry", v)}
		}
		return nil
	}
	return cmp.Or(cfg.qpCaps().check(op), depth("ResponderResources", cfg.ResponderResources), depth("InitiatorDepth", cfg.InitiatorDepth),
		retry("RetryCount", cfg.RetryCount), retry("RNRRetryCount", cfg.RNRRetryCount), cfg.checkAckTimeout(op))
}

// param is the struct rdma_conn_param of cfg, with data as its private
// data. That points at Go memory, which librdmacm copies during the call:
// pin holds it there (a Go pointer inside memory passed to C must be
// pinned) until the caller unpins.
func (c *Conn) param(cfg ConnConfig, data []byte, pin *runtime.Pinner) (rdmacm.ConnParam, error) {
	maxResp, maxInit, err := c.ctx.rdAtoms()
	if err != nil {
		return rdmacm.ConnParam{}, err
	}
	rd := func(v, devMax int) uint8 {
		if v == 0 {
			v = min(16, devMax)
		}
		return uint8(min(v, 255))
	}
	retry := func(v, def int) uint8 {
		switch {
		case v == NoRetry:
			return 0
		case v <= 0 || v > 7:
			return uint8(def)
		}
		return uint8(v)
	}
	p := rdmacm.ConnParam{
		ResponderResources: rd(cfg.ResponderResources, maxResp),
		InitiatorDepth:     rd(cfg.InitiatorDepth, maxInit),
		RetryCount:         retry(cfg.RetryCount, defaultRetryCount),
		RNRRetryCount:      retry(cfg.RNRRetryCount, 7),
	}
	if len(data) > 0 {
		pin.Pin(&data[0])
		p.PrivateData = unsafe.Pointer(&data[0])
		p.PrivateDataLen = uint8(len(data))
	}
	return p, nil
}

func (c *Conn) established() {
	c.local, c.remote = srcAddr(c.id), dstAddr(c.id)
	c.init("Conn " + c.local.String() + "->" + c.remote.String())
}

// fail undoes a half-made Conn and wraps err.
func (c *Conn) fail(what string, err error) error {
	c.release()
	return fmt.Errorf("goverbs: %s: %w", what, err)
}

// release destroys what the Conn made, in reverse order. Live user objects
// on an own PD or CQ (checked by Close beforehand) would make those fail;
// their errors are returned.
func (c *Conn) release() error {
	var errs []error
	if c.qp != nil {
		errs = append(errs, c.qp.closeOwned())
	}
	if c.id != nil {
		errs = append(errs, rdmacm.DestroyID(c.id))
	}
	c.ch.close()
	if c.ownCQ {
		errs = append(errs, c.sendCQ.Close())
	}
	if c.cqCh != nil {
		errs = append(errs, c.cqCh.Close())
	}
	if c.ownPD {
		errs = append(errs, c.pd.Close())
	}
	if c.ctx != nil {
		errs = append(errs, c.ctx.Close())
	}
	return errors.Join(errs...)
}

// Raw returns the struct rdma_cm_id, valid until Close: the fast paths'
// rdma_post_recvv, rdma_post_sendv and friends take it.
func (c *Conn) Raw() *rdmacm.CMID { return c.id }

// QP returns the connection's QP.
func (c *Conn) QP() *QP { return c.qp }

// PD returns the connection's protection domain (cfg.PD, or its own).
func (c *Conn) PD() *PD { return c.pd }

// SendCQ returns the CQ of the QP's send queue.
func (c *Conn) SendCQ() *CQ { return c.sendCQ }

// RecvCQ returns the CQ of the QP's receive queue.
func (c *Conn) RecvCQ() *CQ { return c.recvCQ }

// Context returns librdmacm's device context the connection runs on.
func (c *Conn) Context() *Context { return c.ctx }

// PeerPrivateData returns the private data the peer sent: the client's
// request on the server side, the server's accept on the client side,
// padded with zeros to the transport's size.
func (c *Conn) PeerPrivateData() []byte { return c.peerData }

// LocalAddr and RemoteAddr return the connection's IP endpoints.
func (c *Conn) LocalAddr() netip.AddrPort  { return c.local }
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// Disconnect tears the connection down (rdma_disconnect: the QP goes to
// ERR, flushing its outstanding WRs) and waits for the DISCONNECTED event,
// which comes when the peer answers: from its WaitDisconnect or Close, or,
// if it does neither, when the request times out.
//
// A peer that never answers (it crashed, or the network between is gone)
// makes Disconnect return a *CMEventError matching syscall.ETIMEDOUT once
// the kernel's disconnect request has run out of retries: on RoCE about
// 16 tries of 4.3 s, so give ctx a minute or more to learn it; the
// connection is torn down either way.
func (c *Conn) Disconnect(ctx context.Context) error {
	if err := c.use(); err != nil {
		return err
	}
	defer c.done()
	if !c.disconnecting.Swap(true) {
		if err := rdmacm.Disconnect(c.id); err != nil {
			return err
		}
	}
	return c.waitDisconnected(ctx)
}

// WaitDisconnect waits until the connection is torn down, by the peer or by
// Disconnect. When the peer disconnects, it answers (rdma_disconnect), so
// the peer's Disconnect returns. It returns Disconnect's errors likewise.
func (c *Conn) WaitDisconnect(ctx context.Context) error {
	if err := c.use(); err != nil {
		return err
	}
	defer c.done()
	return c.waitDisconnected(ctx)
}

func (c *Conn) waitDisconnected(ctx context.Context) error {
	for !c.disconnected.Load() {
		// Disconnect and WaitDisconnect may wait together: the one that
		// gets the event sets disconnected (and kicks), and the other,
		// next in turn or parked, must not wait on for another event
		// (TIMEWAIT_EXIT, seconds later, or none at all).
		ev, ok, err := c.ch.nextUnless(ctx, c.disconnected.Load)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if ev.typ == rdmacm.CMEventDisconnected || ev.typ == rdmacm.CMEventDeviceRemoval {
			if !c.disconnecting.Swap(true) {
				// The peer disconnected: answer its request (the DREP),
				// or its Disconnect waits until the request times out.
				rdmacm.Disconnect(c.id)
			}
			if ev.status != 0 || ev.typ == rdmacm.CMEventDeviceRemoval {
				// Torn down, but not by an answering peer: the kernel
				// gave up on the disconnect request (ETIMEDOUT: the peer
				// is gone), or the device went away.
				c.disconnectErr = &CMEventError{Op: "rdma_disconnect", Event: ev.typ, Status: ev.status}
			}
			c.disconnected.Store(true) // after disconnectErr, which the other waiter then reads
			// The other waiter may have taken the fd's turn between the
			// read and the Store, found nothing, and parked: wake it to
			// see disconnected.
			c.ch.fd.kick()
		}
	}
	return c.disconnectErr
}

// Close disconnects (without waiting), destroys the QP and the rdma_cm id,
// and closes the PD and CQ the Conn made itself. It fails with a *BusyError,
// closing nothing, while MRs or other objects made on the Conn's own PD or
// CQ are open.
//
// Once it has begun to tear down, the Conn is closed even if a step fails
// (an MR registered on the Conn's own PD while Close ran): Close returns
// what it could not release, and the Conn's methods return ErrClosed.
func (c *Conn) Close() error {
	return c.closeTearing(c.closeCheck, func() error {
		if c.connected() && !c.accepting.Load() && !c.disconnecting.Swap(true) {
			rdmacm.Disconnect(c.id)
		}
		return c.release()
	}, c.ch.fd.interrupt, c.ch.fd.undo)
}

// busyOwn reports user objects on what the Conn made for itself (its
// Context wrapper, PD, CQ and completion channel), other than its QP.
func (c *Conn) busyOwn() error {
	owned := ownObjects(c.ctx, c.pd, c.ownPD, c.sendCQ, c.ownCQ, c.cqCh)
	return busyOwned(c.label, append(owned, &c.qp.object)...)
}

// ownObjects lists what an rdma_cm connection or listener made for itself:
// its Context wrapper, and its PD, CQ and completion channel when it made
// them (ownPD, ownCQ, ch not nil).
func ownObjects(ctx *Context, pd *PD, ownPD bool, cq *CQ, ownCQ bool, ch *CompChannel) []*object {
	owned := []*object{&ctx.object}
	if ownPD {
		owned = append(owned, &pd.object)
	}
	if ownCQ {
		owned = append(owned, &cq.object)
	}
	if ch != nil {
		owned = append(owned, &ch.object)
	}
	return owned
}

// sockaddrBuf is a struct sockaddr_storage in Go memory (no pointers, so it
// may be passed to C).
type sockaddrBuf struct{ b [16]uint64 }

// raw is sa as the struct sockaddr librdmacm takes.
func (sa *sockaddrBuf) raw() *rdmacm.Sockaddr { return (*rdmacm.Sockaddr)(unsafe.Pointer(sa)) }

// createID creates an RDMA_PS_TCP id on ch. The id comes back through a
// variable of its own: cgo checks the whole Go object a pointer argument
// points into, and a field of a struct holding Go pointers fails that.
func createID(ch *rdmacm.EventChannel) (*rdmacm.CMID, error) {
	var id *rdmacm.CMID
	if err := rdmacm.CreateID(ch, &id, nil, rdmacm.PsTCP); err != nil {
		return nil, err
	}
	return id, nil
}

// reject rejects the request on id with data as its private data.
func reject(id *rdmacm.CMID, data []byte) error {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0]) // no pointers in it: C may read Go memory during the call
	}
	return rdmacm.Reject(id, p, uint8(len(data)))
}

// setAckTimeout sets the id's local ACK timeout (RDMA_OPTION_ID_ACK_TIMEOUT).
func setAckTimeout(id *rdmacm.CMID, timeout uint8) error {
	if err := rdmacm.SetOption(id, int32(rdmacm.OptionID), int32(rdmacm.OptionIDACKTimeout), unsafe.Pointer(&timeout), 1); err != nil {
		return fmt.Errorf("set the ACK timeout: %w", err)
	}
	return nil
}

const (
	afInet  = 2
	afInet6 = 10
)

func sockaddrOf(ap netip.AddrPort) sockaddrBuf {
	var sa sockaddrBuf
	b := (*[128]byte)(unsafe.Pointer(&sa))
	a := ap.Addr()
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	if a.Is4() {
		binary.NativeEndian.PutUint16(b[0:], afInet)
		v4 := a.As4()
		copy(b[4:8], v4[:])
	} else {
		binary.NativeEndian.PutUint16(b[0:], afInet6)
		v6 := a.As16()
		copy(b[8:24], v6[:])
	}
	return sa
}

func addrFrom(p unsafe.Pointer) netip.AddrPort {
	b := (*[128]byte)(p)
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b[0:]) {
	case afInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case afInet6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port)
	}
	return netip.AddrPort{}
}

func srcAddr(id *rdmacm.CMID) netip.AddrPort {
	return addrFrom(unsafe.Pointer(&id.Route.Addr.SrcStorage))
}

func dstAddr(id *rdmacm.CMID) netip.AddrPort {
	return addrFrom(unsafe.Pointer(&id.Route.Addr.DstStorage))
}

// resolveAddrPort parses "host:port", looking the host up when it is not an
// IP address.
func resolveAddrPort(ctx context.Context, addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap, nil
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("goverbs: address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("goverbs: address %q: bad port: %w", addr, err)
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("goverbs: address %q: %w", addr, err)
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(port)), nil
}

// goString copies a NUL-terminated C string.
func goString(p *int8) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(p)), n))
}
