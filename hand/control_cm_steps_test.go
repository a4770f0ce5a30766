package hand

import (
	"context"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
)

// stepConn is a Conn on NewConn's steps with done done, and no rdma_cm id:
// only the checks before a step's first C call may run on it.
func stepConn(done connStep) *Conn {
	c := &Conn{steps: &connSteps{done: done}}
	c.init("Conn (test)")
	return c
}

// The steps refuse to run out of order, twice, after one failed, while one
// runs, on a Conn no NewConn made, and after Close, each with an error
// that names the step to call first (or the one in the way) and matches
// EINVAL (ErrClosed after Close), before touching the rdma_cm id.
func TestConnStepsOrder(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddrPort("192.0.2.1:0")
	steps := map[connStep]func(c *Conn) error{
		stepBind:         func(c *Conn) error { return c.Bind(local) },
		stepResolveAddr:  func(c *Conn) error { return c.ResolveAddr(ctx, "192.0.2.1:7471") },
		stepResolveRoute: func(c *Conn) error { return c.ResolveRoute(ctx) },
		stepCreateQP:     func(c *Conn) error { return c.CreateQP() },
		stepConnect:      func(c *Conn) error { return c.Connect(ctx) },
	}
	for _, tc := range []struct {
		setup func(*Conn)
		done  connStep
		step  connStep
		want  string
	}{
		{done: stepNewConn, step: stepResolveRoute, want: "goverbs: Conn.ResolveRoute: call ResolveAddr first"},
		{done: stepNewConn, step: stepCreateQP, want: "goverbs: Conn.CreateQP: call ResolveRoute first"},
		{done: stepNewConn, step: stepConnect, want: "goverbs: Conn.Connect: call CreateQP first"},
		{done: stepBind, step: stepBind, want: "goverbs: Conn.Bind: done already"},
		{done: stepBind, step: stepResolveRoute, want: "goverbs: Conn.ResolveRoute: call ResolveAddr first"},
		{done: stepResolveAddr, step: stepBind, want: "goverbs: Conn.Bind: must come before ResolveAddr, which is done"},
		{done: stepResolveAddr, step: stepResolveAddr, want: "goverbs: Conn.ResolveAddr: done already"},
		{done: stepResolveAddr, step: stepConnect, want: "goverbs: Conn.Connect: call CreateQP first"},
		{done: stepResolveRoute, step: stepConnect, want: "goverbs: Conn.Connect: call CreateQP first"},
		{done: stepCreateQP, step: stepResolveRoute, want: "goverbs: Conn.ResolveRoute: must come before CreateQP, which is done"},
		{done: stepConnect, step: stepConnect, want: "goverbs: Conn.Connect: done already"},
		{done: stepConnect, step: stepCreateQP, want: "goverbs: Conn.CreateQP: must come before Connect, which is done"},
		{done: stepResolveAddr, step: stepResolveRoute, setup: func(c *Conn) { c.steps.failed = stepResolveRoute },
			want: "goverbs: Conn.ResolveRoute: ResolveRoute failed: only Close is left"},
		{done: stepNewConn, step: stepCreateQP, setup: func(c *Conn) { c.steps.failed = stepResolveAddr },
			want: "goverbs: Conn.CreateQP: ResolveAddr failed: only Close is left"},
		{done: stepNewConn, step: stepResolveAddr, setup: func(c *Conn) { c.steps.running = stepResolveAddr },
			want: "goverbs: Conn.ResolveAddr: ResolveAddr is under way: the steps go one at a time, each after the last returned"},
		{done: stepResolveAddr, step: stepResolveRoute, setup: func(c *Conn) { c.steps.running = stepResolveAddr },
			want: "goverbs: Conn.ResolveRoute: ResolveAddr is under way: the steps go one at a time, each after the last returned"},
	} {
		c := stepConn(tc.done)
		if tc.setup != nil {
			tc.setup(c)
		}
		before := [3]connStep{c.steps.done, c.steps.failed, c.steps.running}
		err := steps[tc.step](c)
		require.EqualError(t, err, tc.want, "%s after %s", tc.step, tc.done)
		require.ErrorIs(t, err, syscall.EINVAL, tc.want)
		require.Equal(t, before, [3]connStep{c.steps.done, c.steps.failed, c.steps.running}, "%s: a refused step changes nothing", tc.want)
	}

	// A Conn Dial, Accept or the EP path made is connected: no steps.
	for s, do := range steps {
		c := &Conn{}
		c.init("Conn (accepted)")
		err := do(c)
		require.ErrorIs(t, err, syscall.EINVAL, "%s", s)
		require.EqualError(t, err, "goverbs: Conn."+s.String()+": this Conn was connected by Dial, Accept or the rdma_create_ep path: the steps are for a Conn from NewConn")
	}

	// After Close, at any step: ErrClosed. The closed Conn here has made
	// nothing to release.
	for _, done := range []connStep{stepNewConn, stepBind, stepResolveAddr, stepResolveRoute} {
		c := stepConn(done)
		require.NoError(t, c.closeCheck(), "nothing of the Conn's own is out before CreateQP")
		require.NoError(t, c.close(func() error { return nil }, nil, nil))
		for s, do := range steps {
			require.ErrorIs(t, do(c), ErrClosed, "%s after %s and Close", s, done)
		}
	}

	// An invalid address is the caller's mistake, refused before the step
	// begins: Bind may still be called.
	c := stepConn(stepNewConn)
	var ae *AttrError
	require.ErrorAs(t, c.Bind(netip.AddrPort{}), &ae)
	require.Equal(t, "local", ae.Field)
	require.Equal(t, stepNewConn, c.steps.done)
	require.Equal(t, stepNone, c.steps.failed)
}

// LocalAddr is the dialling side's: a port without an address is refused
// where it is taken (Dial, NewConn, DialEP, DialUD), and any LocalAddr
// where the listener's address is the local one (Accept, ListenEP,
// UDRequest.Accept, NewMulticast), before anything is made.
func TestLocalAddrAttrErrors(t *testing.T) {
	ctx := context.Background()
	portOnly := netip.AddrPortFrom(netip.Addr{}, 7000)
	some := netip.MustParseAddrPort("192.0.2.1:7000")
	for _, tc := range []struct {
		op string
		do func() error
	}{
		{"Dial", func() error { _, err := Dial(ctx, "192.0.2.1:7471", ConnConfig{LocalAddr: portOnly}); return err }},
		{"NewConn", func() error { _, err := NewConn(ConnConfig{LocalAddr: portOnly}); return err }},
		{"DialEP", func() error { _, err := DialEP(ctx, "192.0.2.1:7471", ConnConfig{LocalAddr: portOnly}); return err }},
		{"DialUD", func() error { _, err := DialUD(ctx, "192.0.2.1:7471", UDConfig{LocalAddr: portOnly}); return err }},
		{"ListenEP", func() error { _, err := ListenEP(ctx, "192.0.2.1:7471", ConnConfig{LocalAddr: some}); return err }},
		{"ConnRequest.Accept", func() error { _, err := (&ConnRequest{}).Accept(ctx, ConnConfig{LocalAddr: some}); return err }},
		{"UDRequest.Accept", func() error { _, err := (&UDRequest{}).Accept(ctx, UDConfig{LocalAddr: some}); return err }},
		{"NewMulticast", func() error { _, err := NewMulticast(ctx, "192.0.2.1", UDConfig{LocalAddr: some}); return err }},
	} {
		var ae *AttrError
		err := tc.do()
		require.ErrorAs(t, err, &ae, tc.op)
		require.Equal(t, tc.op, ae.Op)
		require.Equal(t, "LocalAddr", ae.Field)
		t.Logf("%s: %v", tc.op, err)
	}
}

// ContextOf refuses nil before asking librdmacm.
func TestContextOfNil(t *testing.T) {
	var ae *AttrError
	_, err := ContextOf((*verbs.Context)(nil))
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "raw", ae.Field)
}
