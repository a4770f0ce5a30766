package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// bootPair runs o.command on host a and o.peerCommand on host b, two guests
// linked by qemu UDP sockets, and returns the status rxevm ends with: 0 when
// both commands succeeded (or a host was killed at its peer's request),
// otherwise host a's failure, else host b's.
func bootPair(ctx context.Context, h *host, modules []string, m machine, o options, tools guestTools, stdout io.Writer) (int, error) {
	link, err := newPairLink()
	if err != nil {
		return exitFailure, err
	}
	defer link.close()
	h.logf("link: host a's NIC on 127.0.0.1:%d, host b's on 127.0.0.1:%d (UDP)", link.ports[0], link.ports[1])
	var guests [2]guest
	for i, cmd := range [2][]string{o.command, o.peerCommand} {
		nonce := newNonce()
		killPeer := "RXEVM_KILL_PEER=" + guestPlan{Nonce: nonce}.killPeerMarker()
		g, err := newGuest(modules, m, o, pairNetwork(i, link, tools), cmd, nonce, []string{killPeer})
		if err != nil {
			return exitFailure, err
		}
		defer g.cleanup()
		guests[i] = g
	}

	out := &lineMux{w: stdout}
	var (
		cancels [2]context.CancelCauseFunc
		results [2]pairResult
		wg      sync.WaitGroup
		ended   = make(chan int, 2)
	)
	ctxs := [2]context.Context{}
	for i := range guests {
		ctxs[i], cancels[i] = context.WithCancelCause(ctx)
		defer cancels[i](nil)
	}
	for i := range guests {
		name, peer := pairHosts[i].name, pairHosts[1-i].name
		g := guests[i]
		g.vm.onKillPeer = func() {
			h.logf("host %s asks for host %s's power to be cut", name, peer)
			cancels[1-i](errPowerCut)
		}
		hh := &host{log: &prefixWriter{mux: out, w: h.log, prefix: name + "| "}, verbose: h.verbose}
		if o.verbose {
			hh.logf("$ %s %s", g.vm.qemu, shellJoin(g.vm.args()))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := g.vm.run(ctxs[i], o.timeout, g.plan, &prefixWriter{mux: out, w: stdout, prefix: name + "| "}, hh)
			results[i] = pairResult{code, err}
			cancels[i](nil) // wakes the grace timer's wait for this host
			ended <- i
		}()
	}
	// When one host ends by itself, the other has peerGrace to end too: a
	// command waiting forever for a peer that is gone must not hold the run
	// until -timeout. A host whose power was cut did not end by itself: its
	// peer is finding that out, which may take the kernel minutes.
	go func() {
		for first := range ended {
			if errors.Is(context.Cause(ctxs[first]), errPowerCut) {
				continue
			}
			t := time.NewTimer(o.peerGrace)
			select {
			case <-t.C:
				cancels[1-first](errPeerEnded)
			case <-ctxs[1-first].Done():
			}
			t.Stop()
			return
		}
	}()
	wg.Wait()
	close(ended)
	return pairStatus(results, h)
}

type pairResult struct {
	code int
	err  error
}

// pairStatus logs each host's outcome and picks rxevm's status: the first
// host's failure, in the order a, b; 0 when neither failed.
func pairStatus(results [2]pairResult, h *host) (int, error) {
	code, errs := 0, []error(nil)
	for i, r := range results {
		name := pairHosts[i].name
		if r.err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", name, r.err))
		} else if r.code != 0 {
			h.logf("host %s: exit status %d", name, r.code)
		}
		if code == 0 {
			code = r.code
		}
	}
	return code, errors.Join(errs...)
}

// pairLink is the wire between the two guests: two UDP sockets on
// 127.0.0.1, each connected to the other's port, which each qemu takes as
// its NIC's descriptor (-netdev dgram,local.type=fd). rxevm binds them
// before either qemu starts and holds them until both have ended, so no
// other process can take a port in between, as one could when qemu bound
// ports that rxevm had found free and let go (-netdev socket,localaddr=):
// qemu then failed to start, or, since it binds with SO_REUSEADDR, shared
// the port with another qemu doing the same (another two-host run) and
// each got some of the other's frames. A connected socket takes datagrams
// from its peer's port only.
type pairLink struct {
	files [2]*os.File // host a's socket, host b's
	ports [2]int
}

// newPairLink binds and connects the two sockets of a link.
func newPairLink() (l pairLink, err error) {
	loopback := [4]byte{127, 0, 0, 1}
	fds := [2]int{-1, -1}
	defer func() {
		if err != nil {
			for _, fd := range fds[:] {
				if fd >= 0 {
					syscall.Close(fd)
				}
			}
			err = fmt.Errorf("making the two hosts' UDP link on 127.0.0.1: %w", err)
		}
	}()
	for i := range fds {
		// Close-on-exec: each qemu gets its own socket through ExtraFiles,
		// never the other's.
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return l, err
		}
		fds[i] = fd
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: loopback}); err != nil {
			return l, err
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			return l, err
		}
		l.ports[i] = sa.(*syscall.SockaddrInet4).Port
	}
	for i, fd := range fds {
		if err := syscall.Connect(fd, &syscall.SockaddrInet4{Addr: loopback, Port: l.ports[1-i]}); err != nil {
			return l, err
		}
	}
	for i, fd := range fds {
		l.files[i] = os.NewFile(uintptr(fd), "rxevm-link-"+pairHosts[i].name)
	}
	return l, nil
}

func (l pairLink) close() {
	for _, f := range l.files {
		f.Close()
	}
}

// lineMux serialises whole-line writes from the two consoles to one writer.
type lineMux struct {
	mu sync.Mutex
	w  io.Writer
}

// prefixWriter writes to w through mux, with prefix before every line. Its
// callers write whole lines.
type prefixWriter struct {
	mux    *lineMux
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var sb strings.Builder
	for line := range strings.Lines(string(b)) {
		sb.WriteString(p.prefix)
		sb.WriteString(line)
	}
	p.mux.mu.Lock()
	defer p.mux.mu.Unlock()
	if _, err := io.WriteString(p.w, sb.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}
