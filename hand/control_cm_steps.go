package hand

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// The client's rdma_cm steps, one call each: NewConn (the event channel and
// rdma_create_id), Bind, ResolveAddr, ResolveRoute, CreateQP, Connect. Dial
// is these steps in one call; a program that must time, order or act
// between them (cmtime's table, a source address, receives posted between
// CreateQP and Connect) calls them itself.

// connStep is a step of the client's path, in its order.
type connStep uint8

const (
	stepNone connStep = iota
	stepNewConn
	stepBind
	stepResolveAddr
	stepResolveRoute
	stepCreateQP
	stepConnect
)

var connStepNames = [...]string{"", "NewConn", "Bind", "ResolveAddr", "ResolveRoute", "CreateQP", "Connect"}

func (s connStep) String() string { return connStepNames[s] }

// connSteps is the progress of a Conn NewConn made along the steps. mu is
// never held across a wait: Close reads the progress while a step waits.
type connSteps struct {
	cfg ConnConfig

	mu      sync.Mutex
	done    connStep // the last step that succeeded
	running connStep // the step under way, or stepNone
	failed  connStep // the step that failed, or stepNone: only Close is left
	bound   bool     // Bind bound the id: ResolveAddr does not use cfg.LocalAddr
}

// stepOrderError is a step called when it cannot run: out of order, twice,
// after a step failed, or on a Conn not made by NewConn. rdma_cm says
// EINVAL for a call in the wrong state, and so does this.
type stepOrderError struct{ msg string }

func (e *stepOrderError) Error() string { return e.msg }
func (e *stepOrderError) Unwrap() error { return syscall.EINVAL }

// NewConn begins a client connection step by step: it creates the
// rdma_cm event channel and the RDMA_PS_TCP id (rdma_create_id), and keeps
// cfg for the steps. Then call, in this order, Bind (optional: the source
// address; cfg.LocalAddr does the same inside ResolveAddr), ResolveAddr,
// ResolveRoute, CreateQP (the QP, PD and CQs from cfg, as Dial makes them)
// and Connect (cfg.BeforeConnect, then rdma_connect with cfg.PrivateData,
// waiting until the connection is established). Between two steps the
// Conn's Raw id is there for rdma_cm calls of one's own (rdma_set_option,
// say), and after CreateQP its QP takes receives.
//
// The steps are for one goroutine, each called once, in order: a step
// called out of order, twice, or after another step failed returns an
// error naming the step that must come first (or the one that failed),
// matching syscall.EINVAL, and does nothing. A failed step leaves the Conn
// as far as it got, and only Close is left to call: an rdma_cm id whose
// resolution failed or was abandoned (its ctx ended) may still deliver that
// step's event. A failed Connect closes the Conn itself, as Dial does.
// Close works at every step, from any goroutine, releasing what the steps
// made; during a step's wait it ends the wait, and the step returns an
// error matching ErrClosed.
//
// cfg is checked as Dial checks it, before anything is made (*AttrError).
// Until Connect returns, LocalAddr and RemoteAddr say what is known
// (RemoteAddr from ResolveRoute on), and Disconnect and WaitDisconnect
// have no connection to end.
func NewConn(cfg ConnConfig) (*Conn, error) {
	if err := cfg.checkDial("NewConn"); err != nil {
		return nil, err
	}
	c, err := newConn(cfg)
	if err != nil {
		return nil, fmt.Errorf("goverbs: NewConn: %w", err)
	}
	return c, nil
}

// checkDial refuses what the client's path cannot send or make with cfg.
func (cfg *ConnConfig) checkDial(op string) error {
	if len(cfg.PrivateData) > maxConnectData {
		return &AttrError{Op: op, Field: "PrivateData", Reason: fmt.Sprintf("%d bytes: at most %d", len(cfg.PrivateData), maxConnectData)}
	}
	return cmp.Or(cfg.checkParams(op), checkLocalAddr(op, cfg.LocalAddr))
}

// newConn makes the event channel and the id of a Conn on the steps; an
// error from the id says "creating the id".
func newConn(cfg ConnConfig) (*Conn, error) {
	ch, err := newCMChannel()
	if err != nil {
		return nil, err
	}
	c := &Conn{ch: ch, steps: &connSteps{cfg: cfg, done: stepNewConn}}
	if c.id, err = ch.create(createID); err != nil {
		c.release()
		return nil, fmt.Errorf("creating the id: %w", err)
	}
	c.init("Conn (dialling)")
	return c, nil
}

// beginStep makes s the running step, or says why it cannot run.
func (c *Conn) beginStep(s connStep) error {
	st := c.steps
	if st == nil {
		return &stepOrderError{fmt.Sprintf("goverbs: Conn.%s: this Conn was connected by Dial, Accept or the rdma_create_ep path: the steps are for a Conn from NewConn", s)}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var msg string
	switch {
	case st.running != stepNone:
		msg = st.running.String() + " is under way: the steps go one at a time, each after the last returned"
	case st.failed != stepNone:
		msg = st.failed.String() + " failed: only Close is left"
	case st.done == s:
		msg = "done already"
	case st.done > s:
		msg = "must come before " + st.done.String() + ", which is done"
	case s == stepResolveAddr && st.done >= stepNewConn, st.done == s-1:
		// Bind is optional: ResolveAddr may follow NewConn.
	default:
		msg = "call " + (s - 1).String() + " first"
	}
	if msg != "" {
		return &stepOrderError{"goverbs: Conn." + s.String() + ": " + msg}
	}
	st.running = s
	return nil
}

// endStep records how the running step s ended. ok, when s succeeded,
// runs under mu: it makes the writes Close's check must see (the Conn's
// name, once the route is known).
func (c *Conn) endStep(s connStep, err error, ok func()) {
	st := c.steps
	st.mu.Lock()
	defer st.mu.Unlock()
	st.running = stepNone
	if err != nil {
		st.failed = s
		return
	}
	if ok != nil {
		ok()
	}
	st.done = s
}

// runStep runs the step s (do) holding c, so that a Close meanwhile ends
// its wait and tears down after it. An error from do is wrapped as
// "goverbs: what: err"; one from the order or a closed Conn is returned as
// it is.
func (c *Conn) runStep(ctx context.Context, s connStep, what string, do func() error, ok func()) error {
	if err := c.use(); err != nil {
		return err
	}
	defer c.done()
	if err := c.beginStep(s); err != nil {
		return err
	}
	err := do()
	c.endStep(s, err, ok)
	if err != nil {
		return fmt.Errorf("goverbs: %s: %w", what, withCause(ctx, err))
	}
	return nil
}

// Bind binds the Conn to the local address local (rdma_bind_addr):
// connections go out from it, and the listener sees it as the client's
// address. An unspecified address (0.0.0.0) binds the port alone; port 0
// picks one. It must come right after NewConn, and overrides
// cfg.LocalAddr.
//
// An invalid AddrPort is an *AttrError, refused before the step begins.
func (c *Conn) Bind(local netip.AddrPort) error {
	if !local.IsValid() {
		return &AttrError{Op: "Conn.Bind", Field: "local", Reason: "no address: give 0.0.0.0:PORT for a port on any address"}
	}
	return c.runStep(context.Background(), stepBind, "Conn.Bind "+local.String(), func() error {
		sa := sockaddrOf(local)
		return rdmacm.BindAddr(c.id, sa.raw())
	}, func() { c.steps.bound = true })
}

// ResolveAddr resolves addr ("192.0.2.1:7471", or a host name) to the
// RDMA device and local address the connection goes through
// (rdma_resolve_addr), from cfg.LocalAddr when set and Bind was not
// called. It waits for the result for at most cfg.StepTimeout (0: 2 s)
// and until ctx ends.
func (c *Conn) ResolveAddr(ctx context.Context, addr string) error {
	ap, err := resolveAddrPort(ctx, addr)
	if err != nil {
		return err
	}
	return c.runStep(ctx, stepResolveAddr, "Conn.ResolveAddr "+ap.String(), func() error {
		return c.resolveAddr(ctx, ap)
	}, nil)
}

func (c *Conn) resolveAddr(ctx context.Context, dst netip.AddrPort) error {
	local := c.steps.cfg.LocalAddr
	if c.steps.bound {
		local = netip.AddrPort{} // Bind chose it
	}
	return resolveIDAddr(ctx, c.ch, c.id, local, dst, c.steps.cfg.StepTimeout)
}

// resolveIDAddr resolves dst on id (rdma_resolve_addr, from local unless it
// is the zero AddrPort) and waits on ch for the result: the address step
// of the Conn's path and of DialUD.
func resolveIDAddr(ctx context.Context, ch *cmChannel, id *rdmacm.CMID, local, dst netip.AddrPort, timeout time.Duration) error {
	var srcBuf sockaddrBuf
	src := sourceSockaddr(local, &srcBuf)
	d := sockaddrOf(dst)
	if err := rdmacm.ResolveAddr(id, src, d.raw(), int32(stepTimeout(timeout))); err != nil {
		return err
	}
	_, err := ch.expect(ctx, "rdma_resolve_addr", rdmacm.CMEventAddrResolved)
	return err
}

// ResolveRoute resolves the route to the address ResolveAddr resolved
// (rdma_resolve_route), waiting for at most cfg.StepTimeout (0: 2 s) and
// until ctx ends. From then on LocalAddr and RemoteAddr are known.
func (c *Conn) ResolveRoute(ctx context.Context) error {
	return c.runStep(ctx, stepResolveRoute, "Conn.ResolveRoute", func() error {
		return c.resolveRoute(ctx)
	}, c.established)
}

func (c *Conn) resolveRoute(ctx context.Context) error {
	return resolveIDRoute(ctx, c.ch, c.id, c.steps.cfg.StepTimeout)
}

// resolveIDRoute resolves the route of id, whose address is resolved
// (rdma_resolve_route), and waits on ch for the result.
func resolveIDRoute(ctx context.Context, ch *cmChannel, id *rdmacm.CMID, timeout time.Duration) error {
	if err := rdmacm.ResolveRoute(id, int32(stepTimeout(timeout))); err != nil {
		return err
	}
	_, err := ch.expect(ctx, "rdma_resolve_route", rdmacm.CMEventRouteResolved)
	return err
}

// CreateQP makes the QP (rdma_create_qp) on the device the route goes
// through, with the PD and CQs of cfg, or its own, as Dial does. Then the
// QP takes receives (PostRecvv on the Conn, PostRecv on QP()), which a
// peer's first send finds even with RNRRetryCount NoRetry.
func (c *Conn) CreateQP() error {
	return c.runStep(context.Background(), stepCreateQP, "Conn.CreateQP", func() error {
		return c.setup(c.steps.cfg, "Conn.CreateQP")
	}, nil)
}

// Connect runs cfg.BeforeConnect, sends the connect request with
// cfg.PrivateData (rdma_connect) and waits until the connection is
// established, or ctx ends. A failure closes the Conn, as Dial's does:
// the listener's reject, or no listener, is a *CMEventError matching
// syscall.ECONNREFUSED.
func (c *Conn) Connect(ctx context.Context) error {
	if err := c.beginConnect(); err != nil {
		return err
	}
	if err := c.connectStep(ctx); err != nil {
		return fmt.Errorf("goverbs: Conn.Connect %s: %w", c.remote, withCause(ctx, err))
	}
	return nil
}

// beginConnect makes Connect the running step. c is not held while it
// connects: BeforeConnect may close c, and connect holds c itself from the
// request on.
func (c *Conn) beginConnect() error {
	if err := c.use(); err != nil {
		return err
	}
	defer c.done()
	return c.beginStep(stepConnect)
}

// connectStep is the running Connect step: c.connect, recorded.
func (c *Conn) connectStep(ctx context.Context) error {
	err := c.connect(ctx, c.steps.cfg)
	c.endStep(stepConnect, err, nil)
	return err
}

// closeCheck is Close's check: busyOwn once the steps have made the
// Conn's own objects, and nothing to check before (the user has none of
// them yet). A Conn not on the steps has made them all.
func (c *Conn) closeCheck() error {
	if st := c.steps; st != nil {
		st.mu.Lock()
		made := st.done >= stepCreateQP
		st.mu.Unlock()
		if !made {
			return nil
		}
	}
	return c.busyOwn()
}

// connected reports whether c has sent a connect request or accepted one:
// its Close then disconnects.
func (c *Conn) connected() bool {
	st := c.steps
	if st == nil {
		return true
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.done == stepConnect
}

// ContextOf returns hand's Context for raw, a device context librdmacm
// opened: the Verbs of an rdma_cm id made through generated/rdmacm, say.
// PDs, CQs and MRs made from it can back that id's QP
// (rdmacm.CreateQP(id, pd.Raw(), ...)) and hand's Conns on the device (a
// ConnConfig's PD), and an async event read through any of hand's
// Contexts for the device names hand's objects. The device is found by
// the pointer, not by name.
//
// Each call gives a new handle, as CMContext does: librdmacm keeps the
// device open, Close only marks this handle closed (after its PDs and
// CQs), and closing it leaves the other handles on the device, such as a
// Conn's Context, as they are. A raw context librdmacm did not open (one
// from ibv_open_device, or hand's Open) is refused: use the Context that
// opened it.
func ContextOf(raw *verbs.Context) (*Context, error) {
	if raw == nil {
		return nil, &AttrError{Op: "ContextOf", Field: "raw", Reason: "nil"}
	}
	var found *Context
	err := cmDevices(func(c *verbs.Context) bool {
		if c == raw {
			found = cmContext(raw)
		}
		return found != nil
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("goverbs: ContextOf: %w", err)
	case found == nil:
		return nil, &AttrError{Op: "ContextOf", Field: "raw", Reason: "not a device context of librdmacm's (rdma_get_devices does not list it): one from ibv_open_device or hand.Open belongs to whoever opened it"}
	}
	return found, nil
}
