// Package listenwait waits until a server started as a child process (or in
// a goroutine) listens, so a client started next finds it. It looks in the
// kernel's tables rather than connecting: a probe connection would take the
// one accept of a server that serves a single client. The kernel offers no
// event for a new listener, so it polls. It decides no timeout: the caller's
// context ends the wait.
package listenwait

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TCP waits until a TCP socket listens on port, on any address, IPv4 or
// IPv6, rereading /proc/net/tcp and /proc/net/tcp6 every 20 ms. When ctx
// ends first, the error names the port and how long TCP waited, and wraps
// ctx.Err().
func TCP(ctx context.Context, port int) error {
	start := time.Now()
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			// A kernel without IPv6 has no tcp6: the other table decides.
			if b, err := os.ReadFile(f); err == nil && tcpListens(b, port) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on TCP port %d after %v: %w", port, since(start), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tcpListens reports whether table, in the format of /proc/net/tcp, has a
// socket in state LISTEN on port.
func tcpListens(table []byte, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for line := range strings.Lines(string(table)) {
		// sl local_address rem_address st ...; st 0A is LISTEN.
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// CM waits until an rdma_cm id listens on port, asking `rdma resource show
// cm_id` (iproute2) every 25 ms: rdma_cm's listeners, rsocket's among them,
// are not in /proc/net/tcp. It needs the rdma command and an RDMA device
// the listener is bound to or, for a wildcard address, any device. When ctx
// ends first, the error names the port and how long CM waited, wraps
// ctx.Err() and shows what the rdma command last printed.
func CM(ctx context.Context, port int) error {
	start := time.Now()
	var last []byte
	var lastErr error
	for {
		out, err := exec.CommandContext(ctx, "rdma", "resource", "show", "cm_id").CombinedOutput()
		if err == nil && cmListens(out, port) {
			return nil
		}
		if ctx.Err() == nil {
			// A run that ctx cut short would blame rdma for the timeout.
			last, lastErr = out, err
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("no rdma_cm listener on port %d after %v: %w", port, since(start), ctx.Err())
			if lastErr != nil {
				return fmt.Errorf("%w; rdma resource show cm_id: %v:\n%s", err, lastErr, last)
			}
			return fmt.Errorf("%w; rdma resource show cm_id:\n%s", err, last)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// cmListens reports whether out, the output of `rdma resource show cm_id`,
// lists an id in state LISTEN on port, as in
//
//	link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 148 comm rping src-addr 192.0.2.1:7174 dst-addr 0.0.0.0:0
func cmListens(out []byte, port int) bool {
	want := ":" + strconv.Itoa(port)
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if slices.Contains(f, "LISTEN") && slices.ContainsFunc(f, func(s string) bool { return strings.HasSuffix(s, want) }) {
			return true
		}
	}
	return false
}

// since is the time from start, to the millisecond, for an error message.
func since(start time.Time) time.Duration {
	return time.Since(start).Round(time.Millisecond)
}
