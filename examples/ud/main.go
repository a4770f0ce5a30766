// Command ud echoes datagrams over rdma_cm's RDMA_PS_UDP with package hand
// alone: the client (ud -c ADDR:PORT) sends -n datagrams of -s bytes to the
// server's (ud -l ADDR:PORT) UD QP, which answers each to its sender.
package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goverbs/goverbs/hand"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole program; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ud", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen, server := fs.String("l", "", "serve on `ADDR:PORT` (port 0 picks one, printed)"), fs.String("c", "", "send to `ADDR:PORT`")
	n, size := fs.Int("n", 10, "datagrams"), fs.Int("s", 64, "bytes a datagram")
	if fs.Parse(args) != nil || (*listen == "") == (*server == "") || *n < 1 || *size < 1 {
		fmt.Fprintln(stderr, "ud: give one of -l and -c; -n and -s are at least 1")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := &buffers{n: *n, size: *size}
	cfg := hand.UDConfig{Caps: hand.QPCaps{MaxSendWR: *n, MaxRecvWR: *n}, BeforeConnect: b.setup}
	c, err := (*hand.UDConn)(nil), error(nil)
	if *listen == "" {
		c, err = hand.DialUD(ctx, *server, cfg)
	} else if l, lerr := hand.ListenUD(ctx, *listen); lerr != nil {
		err = lerr
	} else {
		fmt.Fprintln(stdout, "listening on", l.Addr())
		var req *hand.UDRequest
		if req, err = l.Accept(ctx); err == nil {
			c, err = req.Accept(ctx, cfg) // one client: the listener is done
		}
		l.Close()
	}
	if err == nil {
		err = exchange(ctx, c, b, *server != "", stdout)
		for _, ah := range b.ahs {
			ah.Close()
		}
		b.mr.Close()
		c.Close()
	}
	if err != nil {
		fmt.Fprintln(stderr, "ud:", err)
		return 1
	}
	return 0
}

// buffers is one registered region: n receive slots (GRH room, then size
// bytes), then n send slots of size bytes.
type buffers struct {
	mr      *hand.MR
	n, size int
	ahs     []*hand.AH // the server's, one for each datagram it answers
}

func (b *buffers) recvAt(i int) int { return i * (hand.GRHSize + b.size) }
func (b *buffers) sendAt(i int) int { return b.recvAt(b.n) + i*b.size }

// setup (BeforeConnect) registers the buffers and posts n receives, wr_id i
// into slot i, before the peer may send: UD drops what finds no receive.
func (b *buffers) setup(c *hand.UDConn) (err error) {
	if b.mr, err = c.PD().Alloc(b.sendAt(b.n), hand.AccessLocalWrite); err != nil {
		return err
	}
	rc, err := hand.NewRecvChain(b.n, 1)
	if err != nil {
		return err
	}
	defer rc.Close()
	w := rc.Reserve(b.n)
	for i := range b.n {
		w.Set(i, uint64(i), hand.UDRecvSGE(b.mr.Addr()+uint64(b.recvAt(i)), uint32(b.size), b.mr.LKey()))
	}
	return rc.PostRecv(c.QP())
}

// exchange sends n datagrams and takes n back (the client), or takes n and
// echoes each to its sender (the server). Every completion must succeed.
func exchange(ctx context.Context, c *hand.UDConn, b *buffers, client bool, stdout io.Writer) error {
	p, err := hand.NewPoller(c.RecvCQ(), 16)
	sc, err2 := hand.NewSendChain(b.n, 1, 0)
	if err = cmp.Or(err, err2); err != nil {
		return err
	}
	defer func() { p.Close(); sc.Close() }()
	mem, want := b.mr.Bytes(), map[string]bool{}
	if client {
		w := sc.Reserve(b.n)
		for i := range b.n {
			msg := fmt.Appendf(nil, "datagram %d of %d from QP %d ", i, b.n, c.QP().Num())
			copy(mem[b.sendAt(i):b.sendAt(i+1)], bytes.Repeat(msg, b.size))
			want[string(mem[b.sendAt(i):b.sendAt(i+1)])] = true
			w.SetUD(i, uint64(i), hand.Signaled, b.mr.SGE(b.sendAt(i), b.size), c.AH(), c.RemoteQPN(), c.RemoteQKey())
		}
		if err := sc.PostSend(c.QP()); err != nil {
			return err
		}
	}
	for done := 0; done < 2*b.n; {
		wcs, err := p.Wait(ctx)
		if err != nil {
			return err
		}
		for _, wc := range wcs {
			done++
			if err := wc.Err(); err != nil {
				return fmt.Errorf("wr %d: %w", wc.WRID(), err)
			} else if !wc.IsRecv() {
				continue
			}
			i := int(wc.WRID())
			grh, payload, err := hand.SplitUD(mem[b.recvAt(i):b.recvAt(i+1)], &wc)
			if err != nil {
				return err
			}
			if client && !want[string(payload)] {
				return fmt.Errorf("echo %q is none of the datagrams sent, or came twice", payload)
			} else if client {
				delete(want, string(payload))
				continue
			}
			ah, err := c.PD().NewAHFromWC(&wc, grh, c.Port())
			if err != nil {
				return err
			}
			b.ahs = append(b.ahs, ah)
			sc.Reserve(1).SetUD(0, uint64(i), hand.Signaled, b.mr.SGE(b.recvAt(i)+hand.GRHSize, len(payload)), ah, wc.SrcQP(), hand.UDPQKey)
			if err := sc.PostSend(c.QP()); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stdout, "%d datagrams of %d bytes each way, peer %s\n", b.n, b.size, c.RemoteAddr())
	return nil
}
