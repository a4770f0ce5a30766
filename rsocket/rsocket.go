// Package rsocket is a stream connection over RDMA that speaks librdmacm's
// rsocket protocol: a Go program can talk to a C program on rsockets
// (rstream, or any sockets program under LD_PRELOAD=librspreload.so), and
// to another Go program, through the net.Conn and net.Listener interfaces.
//
//	l, err := rsocket.Listen("tcp", "192.0.2.1:7471") // an address of the RDMA device's interface
//	...
//	c, err := l.Accept() // a net.Conn: hand it to net/http, io.Copy, ...
//
//	c, err := rsocket.Dial("tcp", "192.0.2.1:7471")
//
// Addresses are *net.TCPAddr: rsocket is an AF_INET or AF_INET6 stream
// socket, on rdma_cm's TCP port space, where a TCP listener on the same
// port does not conflict.
//
// # Goroutines
//
// Each connection has one RC QP and one CQ with a completion channel. A
// goroutine of the connection's own reaps the CQ, parked on the netpoller
// between completions, and a second waits for rdma_cm's disconnect; a
// blocked Read, Write or Accept parks its goroutine. No call holds an OS
// thread while it waits. One Read and one Write may run at once, from
// different goroutines, as on a *net.TCPConn.
//
// # Deadlines and closing
//
// SetDeadline, SetReadDeadline and SetWriteDeadline end blocked calls,
// pending ones included, with a *net.OpError matching
// os.ErrDeadlineExceeded whose Timeout method reports true. Close ends
// them with net.ErrClosed; CloseWrite ends this side's writing, and the
// peer's Read then returns io.EOF once it has read what came before.
//
// # Dead peers
//
// A peer process that dies without closing (its kernel disconnects the
// connection) ends a blocked Read with an error matching
// syscall.ECONNRESET. A peer whose host goes silent (power lost, link
// cut: no disconnect ever comes) is found by keepalive probes, rsocket's,
// sent on an idle connection every Config.KeepAlive (15 s by default): a
// probe left unacknowledged for another KeepAlive (and the path's ACK
// timeout) fails the connection, so a blocked Read returns an error
// matching syscall.ETIMEDOUT within about 32 s by default of the peer's
// last answer.
//
// # Protocol
//
// docs/rsocket.md in the module describes the wire protocol as this
// package speaks it, and what it checks of each field a peer sends.
package rsocket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/rsocket/internal/wire"
)

// checkNetwork refuses networks other than TCP's.
func checkNetwork(network string) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return nil
	}
	return net.UnknownNetworkError(network)
}

// resolve resolves address for network ("tcp4" takes IPv4 addresses
// only). An empty host is the unspecified address (listening only).
func resolve(ctx context.Context, network, address string) (netip.AddrPort, error) {
	if err := checkNetwork(network); err != nil {
		return netip.AddrPort{}, err
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := net.DefaultResolver.LookupPort(ctx, "tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		if network == "tcp6" {
			return netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p)), nil
		}
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	want := map[string]string{"tcp": "ip", "tcp4": "ip4", "tcp6": "ip6"}[network]
	ips, err := net.DefaultResolver.LookupNetIP(ctx, want, host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(p)), nil
}

// Listener is an rsocket listener. It implements net.Listener.
type Listener struct {
	hl        *hand.Listener
	cfg       Config
	onRefused func(net.Addr, error)
	addr      *net.TCPAddr
	ctx       context.Context
	cancel    context.CancelFunc
	dl        deadline
	once      sync.Once
	err       error
}

// ListenConfig holds listening options.
type ListenConfig struct {
	Config // each accepted connection's sizes
	// OnRefused, when set, is called with each connection request Accept
	// rejected or failed to accept (its connection data failed a check,
	// or the connection never came up), and why; Accept goes on waiting.
	OnRefused func(remote net.Addr, err error)
}

// Listen listens on address ("ip:port", port 0 picks one) of network
// "tcp", "tcp4" or "tcp6". The address must be one of an RDMA device's
// network interface (soft-RoCE's included), or the unspecified address.
func Listen(network, address string) (*Listener, error) {
	var lc ListenConfig
	return lc.Listen(context.Background(), network, address)
}

// Listen is Listen with lc's options; ctx bounds the address's
// resolution.
func (lc *ListenConfig) Listen(ctx context.Context, network, address string) (*Listener, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "listen", Net: network, Err: err}
	}
	if _, _, err := lc.Config.sizes(); err != nil {
		return nil, opErr(err)
	}
	ap, err := resolve(ctx, network, address)
	if err != nil {
		return nil, opErr(err)
	}
	hl, err := hand.Listen(ctx, ap.String())
	if err != nil {
		return nil, opErr(err)
	}
	l := &Listener{hl: hl, cfg: lc.Config, onRefused: lc.OnRefused, addr: net.TCPAddrFromAddrPort(hl.Addr())}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.dl.init(nil)
	return l, nil
}

// Addr returns the listener's address, a *net.TCPAddr.
func (l *Listener) Addr() net.Addr { return l.addr }

// Close stops listening; a blocked Accept returns net.ErrClosed.
// Connections accepted before stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.dl.stop()
		l.err = l.hl.Close()
	})
	return l.err
}

// SetDeadline sets the deadline for Accept calls, pending ones included,
// as *net.TCPListener's: past it they return an error matching
// os.ErrDeadlineExceeded. The zero time means none.
func (l *Listener) SetDeadline(t time.Time) error {
	l.dl.set(t)
	return nil
}

// Accept waits for the next connection; it returns a *Conn.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn is Accept returning the *Conn. A request whose connection
// data is not rsocket's (a peer of another protocol, or one that lies) is
// rejected, and Accept waits for the next.
func (l *Listener) AcceptConn() (*Conn, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: err}
	}
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	expired := l.dl.wait()
	go func() {
		select {
		case <-expired:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		req, err := l.hl.Accept(ctx)
		if err != nil {
			switch {
			case l.ctx.Err() != nil || errors.Is(err, hand.ErrClosed):
				return nil, opErr(net.ErrClosed)
			case isClosed(expired):
				return nil, opErr(os.ErrDeadlineExceeded)
			}
			return nil, opErr(err)
		}
		peer, err := wire.ParseConnData(req.PrivateData())
		if err != nil {
			req.Reject(nil)
			l.refused(req, err)
			continue
		}
		c, hcfg, err := newConn(l.cfg)
		if err != nil {
			req.Reject(nil)
			return nil, opErr(err)
		}
		h, err := req.Accept(ctx, hcfg)
		if err != nil {
			if l.ctx.Err() != nil {
				return nil, opErr(net.ErrClosed)
			}
			if isClosed(expired) {
				return nil, opErr(os.ErrDeadlineExceeded)
			}
			l.refused(req, err) // the client went away, or its connection never came up
			continue
		}
		c.start(h, peer)
		return c, nil
	}
}

func (l *Listener) refused(req *hand.ConnRequest, err error) {
	if l.onRefused != nil {
		l.onRefused(net.TCPAddrFromAddrPort(req.RemoteAddr()), err)
	}
}

// Dialer holds options for dialling.
type Dialer struct {
	// Timeout bounds the whole dial (address and route resolution, the
	// connection); 0 means none beyond the steps' own (2 s each for
	// rdma_cm's address and route resolution).
	Timeout time.Duration
	// LocalAddr, a *net.TCPAddr, is the source address: one of the RDMA
	// device's interface. nil lets the route choose.
	LocalAddr net.Addr
	// Config sizes the connection.
	Config
}

// Dial connects to address ("ip:port") of network "tcp", "tcp4" or "tcp6".
func Dial(network, address string) (*Conn, error) {
	var d Dialer
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to address with d's options; ctx bounds the dial,
// not the connection. A refused connection's error matches
// syscall.ECONNREFUSED.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (*Conn, error) {
	opErr := func(err error) error {
		var src net.Addr
		if d.LocalAddr != nil {
			src = d.LocalAddr
		}
		return &net.OpError{Op: "dial", Net: network, Source: src, Err: err}
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	ap, err := resolve(ctx, network, address)
	if err != nil {
		return nil, opErr(err)
	}
	c, hcfg, err := newConn(d.Config)
	if err != nil {
		return nil, opErr(err)
	}
	if d.LocalAddr != nil {
		ta, ok := d.LocalAddr.(*net.TCPAddr)
		if !ok {
			return nil, opErr(fmt.Errorf("LocalAddr %v: want a *net.TCPAddr", d.LocalAddr))
		}
		hcfg.LocalAddr = ta.AddrPort()
	}
	h, err := hand.Dial(ctx, ap.String(), hcfg)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = errors.Join(os.ErrDeadlineExceeded, err)
		}
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	peer, err := wire.ParseConnData(h.PeerPrivateData())
	if err != nil {
		c.freeAll()
		h.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	c.start(h, peer)
	return c, nil
}

// Interface checks.
var (
	_ net.Conn     = (*Conn)(nil)
	_ net.Listener = (*Listener)(nil)
)
