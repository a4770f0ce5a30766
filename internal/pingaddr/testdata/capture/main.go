// Command capture records the bytes rdma-core's ping-pong examples send on
// their TCP side channel, for pingaddr's tests. It runs each tool's server
// and client on one verbs device, the client connected through a TCP relay
// that copies both directions and keeps what it copied, and writes to -out:
//
//	TOOL.client          the bytes the client sent to the server
//	TOOL.server          the bytes the server sent to the client
//	TOOL.client.printed  the client's command line, stdout and stderr, exit status
//	TOOL.server.printed  the same for the server
//	VERSION              the rdma-core package the tools came from
//
// It needs a verbs device, so it runs in the soft-RoCE VM; see
// ../README.md for the command. It lives in testdata so that go build
// ./... and go test ./... leave it alone.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tool is one example and the arguments its two sides share.
type tool struct {
	name string // file name prefix
	prog string
	args []string
}

func main() {
	out := flag.String("out", ".", "directory for the captured files")
	dev := flag.String("d", os.Getenv("RXE_DEVICE"), "verbs device")
	gid := flag.String("g", os.Getenv("RXE_GID_INDEX"), "GID index")
	only := flag.String("only", "", "comma-separated tool names to capture (default all)")
	flag.Parse()
	common := []string{"-d", *dev, "-g", *gid, "-n", "5"}
	tools := []tool{
		{"rc", "ibv_rc_pingpong", common},
		{"uc", "ibv_uc_pingpong", common},
		{"ud", "ibv_ud_pingpong", append([]string{"-s", "512"}, common...)}, // within rxe's 1024-byte MTU
		{"srq", "ibv_srq_pingpong", append([]string{"-q", "4"}, common...)},
		{"xsrq", "ibv_xsrq_pingpong", common},
	}
	if err := version(*out); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
	st := 0
	for i, t := range tools {
		if *only != "" && !strings.Contains(","+*only+",", ","+t.name+",") {
			continue
		}
		if err := capture(*out, t, 18700+2*i); err != nil {
			fmt.Fprintf(os.Stderr, "capture: %s: %v\n", t.name, err)
			st = 1
			continue
		}
		fmt.Printf("capture: %s: done\n", t.name)
	}
	os.Exit(st)
}

// version records which rdma-core the examples come from.
func version(dir string) error {
	b, err := exec.Command("dpkg-query", "-W", "-f", "${Package} ${Version}\n", "ibverbs-utils", "libibverbs1").Output()
	if err != nil {
		return fmt.Errorf("dpkg-query: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "VERSION"), b, 0o644)
}

// proc is a C tool running as a child, its output kept with its command
// line and exit status.
type proc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

func start(ctx context.Context, prog string, args ...string) (*proc, error) {
	p := &proc{cmd: exec.CommandContext(ctx, prog, args...), done: make(chan error, 1)}
	fmt.Fprintf(&p.out, "$ %s %s\n", prog, strings.Join(args, " "))
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

func (p *proc) wait() error {
	err := <-p.done
	fmt.Fprintf(&p.out, "exit status %d\n", p.cmd.ProcessState.ExitCode())
	return err
}

func capture(dir string, t tool, port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	relayPort := port + 1
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(relayPort))
	if err != nil {
		return err
	}
	defer ln.Close()
	srv, err := start(ctx, t.prog, append(t.args, "-p", strconv.Itoa(port))...)
	if err != nil {
		return err
	}
	cli, err := start(ctx, t.prog, append(t.args, "-p", strconv.Itoa(relayPort), "127.0.0.1")...)
	if err != nil {
		return err
	}
	var toServer, toClient bytes.Buffer
	relayErr := make(chan error, 1)
	go func() { relayErr <- relay(ctx, ln, "127.0.0.1:"+strconv.Itoa(port), &toServer, &toClient) }()
	errs := []error{cli.wait(), srv.wait()}
	// Both have exited: what they sent is in the relay's sockets already.
	select {
	case err = <-relayErr:
	case <-time.After(5 * time.Second):
		cancel()
		err = <-relayErr
	}
	errs = append(errs, err)
	for _, f := range []struct {
		name string
		b    []byte
	}{
		{t.name + ".client", toServer.Bytes()}, {t.name + ".server", toClient.Bytes()},
		{t.name + ".client.printed", cli.out.Bytes()}, {t.name + ".server.printed", srv.out.Bytes()},
	} {
		errs = append(errs, os.WriteFile(filepath.Join(dir, f.name), f.b, 0o644))
	}
	return errors.Join(errs...)
}

// relay accepts the client, connects to the server (retrying while nothing
// listens there: a refused connection does not use up the server's one
// accept) and copies both ways, keeping a copy of each direction.
// When ctx ends (the tools hang, or died before connecting) it closes
// everything it has open, so it always returns.
func relay(ctx context.Context, ln net.Listener, server string, toServer, toClient *bytes.Buffer) error {
	var mu sync.Mutex
	open := []io.Closer{ln}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	})
	defer stop()
	keep := func(c io.Closer) {
		mu.Lock()
		defer mu.Unlock()
		open = append(open, c)
	}
	c, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	defer c.Close()
	keep(c)
	var s net.Conn
	for {
		if s, err = net.Dial("tcp", server); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dial %s: %w", server, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer s.Close()
	keep(s)
	var wg sync.WaitGroup
	var e1, e2 error
	wg.Add(2)
	go func() { defer wg.Done(); e1 = pipe(s, io.TeeReader(c, toServer)) }()
	go func() { defer wg.Done(); e2 = pipe(c, io.TeeReader(s, toClient)) }()
	wg.Wait()
	return errors.Join(e1, e2)
}

// pipe copies until EOF, then half-closes dst so the peer sees it too.
func pipe(dst net.Conn, src io.Reader) error {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
