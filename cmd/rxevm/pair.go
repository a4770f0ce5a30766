package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// bootPair runs o.command on host a and o.peerCommand on host b, two guests
// linked by qemu UDP sockets, and returns the status rxevm ends with: 0 when
// both commands succeeded (or a host was killed at its peer's request),
// otherwise host a's failure, else host b's.
func bootPair(ctx context.Context, h *host, modules []string, k kernel, o options, tools guestTools, stdout io.Writer) (int, error) {
	ports, err := freeUDPPorts()
	if err != nil {
		return exitFailure, err
	}
	var guests [2]guest
	for i, cmd := range [2][]string{o.command, o.peerCommand} {
		nonce := newNonce()
		killPeer := "RXEVM_KILL_PEER=" + guestPlan{Nonce: nonce}.killPeerMarker()
		g, err := newGuest(modules, k, o, pairNetwork(i, ports, tools), cmd, nonce, []string{killPeer})
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

// freeUDPPorts returns two UDP ports on 127.0.0.1 that were free a moment
// ago, for the two qemu sockets.
func freeUDPPorts() ([2]int, error) {
	var ports [2]int
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range ports {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return ports, fmt.Errorf("finding a free UDP port for the link: %w", err)
		}
		conns = append(conns, c)
		ports[i] = c.LocalAddr().(*net.UDPAddr).Port
	}
	return ports, nil
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
