package rxe

// The rsocket package against librdmacm's own rsockets, on rxe0: rdma-core's
// rstream, both ways round, in its blocking, non-blocking and poll modes;
// and a plain sockets echo program of this package's (testdata/rsecho.c)
// run under LD_PRELOAD=librspreload.so, both ways round. The Go side checks
// every byte it reads; rstream checks what it reads too (-T v), as does
// rsecho.
//
// rstream runs against every release (its protocol and flags are the same
// from 33.2 to 65.0; -test.short runs fewer sizes and modes), and so does
// rsecho: make rxe-test and rxe-matrix build it with each release's test
// binaries and name it by GOVERBS_RSECHO; without it the tests build it
// with the guest's C compiler, and fail on a root that has none.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/rsocket"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// rstreamCase is one custom rstream run (-S size -C count -I iters): after
// a 16-byte exchange each way, each iteration has the client send count
// writes of size bytes and the server read them, then the server send as
// many back. With -T v each side fills every byte it sends, the 16 bytes
// included, with a counter that runs on across the whole connection (byte
// i of either direction is i mod 256), and checks that what it reads
// continues its own counter: format_buf and verify_buf in rdma-core's
// librdmacm/examples/common.c.
type rstreamCase struct {
	name               string
	size, count, iters int
	cBuf               int // rstream -B: SO_SNDBUF and SO_RCVBUF, which rsocket doubles; 0 leaves rstream's 1<<19
	goBuf              int // the Go side's rsocket.Config.BufferSize; 0 is its default, 128 KiB
	mode               string
}

// rstreamCases: small writes, many of them, in every mode; page-sized ones
// that wrap the buffers; writes larger than every buffer on both sides
// (rstream's default SO_*BUF of 512 KiB gives it 1 MiB buffers), in every
// mode; and both sides with small buffers, rstream's 8 KiB (-B 4096). The
// modes are rstream's -T: b blocking calls, n non-blocking ones (rstream
// spins on EAGAIN), a non-blocking with rpoll. -test.short (the release
// matrix) runs one of each mode at the two sizes that matter most.
func rstreamCases() []rstreamCase {
	small := rstreamCase{name: "64x200", size: 64, count: 200, iters: 2}
	page := rstreamCase{name: "4099x20", size: 4099, count: 20, iters: 1}
	large := rstreamCase{name: "1.5MiB", size: 3<<19 + 1, count: 1, iters: 1}
	tight := rstreamCase{name: "small_buffers", size: 100003, count: 2, iters: 1, cBuf: 4096, goBuf: 8192}
	if testing.Short() {
		return []rstreamCase{small.in("b"), large.in("n"), tight.in("a")}
	}
	return []rstreamCase{small.in("b"), small.in("n"), small.in("a"), page.in("b"),
		large.in("b"), large.in("n"), large.in("a"), tight.in("b"), tight.in("n")}
}

func (c rstreamCase) in(mode string) rstreamCase { c.mode = mode; return c }

func (c rstreamCase) args() []string {
	a := []string{"-S", strconv.Itoa(c.size), "-C", strconv.Itoa(c.count), "-I", strconv.Itoa(c.iters), "-T", "v", "-T", c.mode}
	if c.cBuf > 0 {
		a = append(a, "-B", strconv.Itoa(c.cBuf))
	}
	return a
}

// counter is rstream's data for one direction: byte i is i mod 256.
type counter struct{ next byte }

func (c *counter) fill(b []byte) {
	for i := range b {
		b[i] = c.next
		c.next++
	}
}

// check reports the first byte of b that does not continue the counter,
// at offset off of the stream.
func (c *counter) check(b []byte, off int64) error {
	for i, v := range b {
		if v != c.next {
			return fmt.Errorf("byte %d of the stream is %d, want %d", off+int64(i), v, c.next)
		}
		c.next++
	}
	return nil
}

// rstreamPeer is rstream's side of the transfer, client or server, on c:
// it sends the counter and checks every byte it reads against it. Then it
// waits for rstream to shut the connection down, which must come with
// nothing after the last transfer.
func rstreamPeer(c *rsocket.Conn, client bool, rc rstreamCase) error {
	var out, in counter
	var got int64
	buf := make([]byte, max(rc.size, 16))
	send := func(n int) error {
		out.fill(buf[:n])
		if _, err := c.Write(buf[:n]); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	}
	recv := func(n int) error {
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return fmt.Errorf("read after %d bytes: %w", got, err)
		}
		if err := in.check(buf[:n], got); err != nil {
			return err
		}
		got += int64(n)
		return nil
	}
	first, second := send, recv // the client's order
	if !client {
		first, second = recv, send
	}
	if err := first(16); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := second(16); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	for it := range rc.iters {
		for range rc.count {
			if err := first(rc.size); err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
		}
		for range rc.count {
			if err := second(rc.size); err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
		}
	}
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		return fmt.Errorf("after the transfer, rstream's shutdown: Read = %d, %v; want 0, io.EOF", n, err)
	}
	return nil
}

// checkRstream checks rstream's side: exit 0, no verification failure, and
// the custom test's result line: name, size, transfers, iterations and
// total bytes as rstream formats them.
func checkRstream(t *testing.T, run tooltest.Run, rc rstreamCase) {
	t.Helper()
	t.Logf("%s output:\n%s", run.Name, run.Out)
	if run.Failed() {
		t.Errorf("%s failed: exit %d, %s", run.Name, run.ExitCode, run.Err)
	}
	if strings.Contains(run.Out, "verification failed") {
		t.Errorf("%s found bytes the Go side sent wrong", run.Name)
	}
	total := int64(rc.iters) * int64(rc.count) * int64(rc.size) * 2
	want := []string{"custom", rstreamSize(int64(rc.size)), rstreamCount(int64(rc.count)), rstreamCount(int64(rc.iters)), rstreamSize(total)}
	for line := range strings.Lines(run.Out) {
		if f := strings.Fields(line); len(f) >= len(want) && slices.Equal(f[:len(want)], want) {
			return
		}
	}
	t.Errorf("%s printed no result line starting %q", run.Name, strings.Join(want, " "))
}

// rstreamSize is size_str of librdmacm/examples/common.c: 976k, 1.5m, 64.
func rstreamSize(n int64) string {
	base, mag := int64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if n/base < 10 {
		if frac := n % base * 10 / base; frac != 0 {
			return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
		}
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// rstreamCount is cnt_str of common.c: 500, 1k, 2m.
func rstreamCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatInt(n, 10)
}

func TestRstreamFormats(t *testing.T) {
	for n, want := range map[int64]string{64: "64", 1000: "1000", 4099: "4k", 999424: "976k", 3<<19 + 1: "1.5m", 12 << 20: "12m", 4 << 30: "4g"} {
		if got := rstreamSize(n); got != want {
			t.Errorf("rstreamSize(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{3: "3", 500: "500", 1000: "1k", 2_500_000: "2m"} {
		if got := rstreamCount(n); got != want {
			t.Errorf("rstreamCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// The Go client against rstream's server, and rstream's client against the
// Go server, in each mode at each size.
func TestInteropRstream(t *testing.T) {
	RequireDevice(t)
	release, _ := loadedRelease(t)
	t.Logf("rdma-core %s's rstream", release)
	addr := localAddr()
	port := 18700
	for _, rc := range rstreamCases() {
		port++
		cport := port
		t.Run("go_client/"+rc.mode+"/"+rc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			args := append([]string{"-b", addr, "-p", strconv.Itoa(cport)}, rc.args()...)
			srv := tooltest.StartC(t, ctx, "rstream server", "rstream", args...)
			if err := listenwait.CM(ctx, cport); err != nil {
				cancel()
				t.Fatalf("rstream server: %v; output:\n%s", err, srv.Wait().Out)
			}
			start := time.Now()
			d := rsocket.Dialer{Timeout: 10 * time.Second, Config: rsocket.Config{BufferSize: rc.goBuf}}
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(cport)))
			if err != nil {
				cancel()
				t.Fatalf("dial rstream's server: %v; its output:\n%s", err, srv.Wait().Out)
			}
			c.SetDeadline(time.Now().Add(interopTimeout))
			err = rstreamPeer(c, true, rc)
			c.Close()
			if err != nil {
				cancel()
				t.Errorf("Go client: %v", err)
			}
			checkRstream(t, srv.Wait(), rc)
			t.Logf("Go client against rstream -T %s: %v", rc.mode, time.Since(start))
		})
		t.Run("go_server/"+rc.mode+"/"+rc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			lc := rsocket.ListenConfig{Config: rsocket.Config{BufferSize: rc.goBuf}}
			l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr, "0"))
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer l.Close()
			lport := l.Addr().(*net.TCPAddr).Port
			start := time.Now()
			args := append([]string{"-s", addr, "-p", strconv.Itoa(lport)}, rc.args()...)
			cli := tooltest.StartC(t, ctx, "rstream client", "rstream", args...)
			l.SetDeadline(time.Now().Add(30 * time.Second))
			c, err := l.AcceptConn()
			if err != nil {
				cancel()
				t.Fatalf("accept rstream's client: %v; its output:\n%s", err, cli.Wait().Out)
			}
			c.SetDeadline(time.Now().Add(interopTimeout))
			err = rstreamPeer(c, false, rc)
			c.Close()
			if err != nil {
				cancel()
				t.Errorf("Go server: %v", err)
			}
			checkRstream(t, cli.Wait(), rc)
			t.Logf("rstream -T %s client against the Go server: %v", rc.mode, time.Since(start))
		})
	}
}

// rsechoPeriod is rsecho's pattern: byte i of each stream is i % 251.
const rsechoPeriod = 251

// rsecho returns rsecho, the one $GOVERBS_RSECHO names or else
// testdata/rsecho.c built with the guest's C compiler once per test
// binary, and librspreload.so; it fails the test when it has neither.
func rsecho(t *testing.T) (prog, preload string) {
	t.Helper()
	release, _ := loadedRelease(t)
	rsechoOnce.Do(func() {
		rsechoBuilt.preload, rsechoBuilt.err = findPreload()
		if rsechoBuilt.err != nil {
			return
		}
		if prog := os.Getenv(rsechoEnv); prog != "" {
			if _, err := os.Stat(prog); err != nil {
				rsechoBuilt.err = fmt.Errorf("%s: %w", rsechoEnv, err)
			}
			rsechoBuilt.prog = prog
			return
		}
		start := time.Now()
		defer func() { rsechoBuilt.took = time.Since(start) }()
		cc, err := exec.LookPath("cc")
		if err != nil {
			rsechoBuilt.err = fmt.Errorf("%s is unset and there is no C compiler (cc) to build testdata/rsecho.c (make rxe-test and rxe-matrix build it and set %s): %w", rsechoEnv, rsechoEnv, err)
			return
		}
		dir, err := os.MkdirTemp("", "rsecho")
		if err != nil {
			rsechoBuilt.err = err
			return
		}
		rsechoBuilt.prog = filepath.Join(dir, "rsecho")
		out, err := exec.Command(cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", rsechoBuilt.prog, "testdata/rsecho.c").CombinedOutput()
		if err != nil {
			rsechoBuilt.err = fmt.Errorf("%s testdata/rsecho.c: %v\n%s", cc, err, out)
		}
	})
	if rsechoBuilt.err != nil {
		t.Fatalf("rdma-core %s: %v", release, rsechoBuilt.err)
	}
	if rsechoBuilt.took > 0 {
		t.Logf("built testdata/rsecho.c in the guest in %v (%s unset)", rsechoBuilt.took.Round(time.Millisecond), rsechoEnv)
		rsechoBuilt.took = 0
	}
	return rsechoBuilt.prog, rsechoBuilt.preload
}

var (
	rsechoOnce  sync.Once
	rsechoBuilt struct {
		prog, preload string
		took          time.Duration // building it in the guest
		err           error
	}
)

// rsechoEnv names a prebuilt rsecho: make rxe-test builds it on the host,
// where cc takes a fraction of a second, not the minute or two it can take
// in the emulated guest.
const rsechoEnv = "GOVERBS_RSECHO"

// findPreload returns librdmacm's librspreload.so: rdma-core installs it
// in the rsocket directory beside the libraries.
func findPreload() (string, error) {
	for _, pat := range []string{"/usr/lib/*/rsocket/librspreload.so*", "/usr/lib/rsocket/librspreload.so*", "/usr/lib64/rsocket/librspreload.so*"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", errors.New("librspreload.so is not installed (package librdmacm1): looked in /usr/lib/*/rsocket")
}

// startRsecho starts rsecho under librspreload.
func startRsecho(t *testing.T, ctx context.Context, name, prog, preload string, args ...string) *tooltest.CTool {
	t.Helper()
	return tooltest.StartCEnv(t, ctx, name, []string{"LD_PRELOAD=" + preload}, prog, args...)
}

// rsechoSizes are the totals each way and rsecho's client's largest write:
// one byte, small writes, and writes larger than librspreload's 128 KiB
// buffers.
func rsechoSizes() [][2]int {
	s := [][2]int{{1, 1}, {100_000, 333}, {4<<20 + 5, 1 << 20}}
	if testing.Short() {
		return s[1:]
	}
	return s
}

// rsechoListening waits for rsecho's server to listen on port through
// rdma_cm, and checks that no TCP socket listens there: the preload made
// its socket an rsocket, so the test proves nothing about plain TCP.
func rsechoListening(t *testing.T, ctx context.Context, srv *tooltest.CTool, port int) {
	t.Helper()
	if err := listenwait.CM(ctx, port); err != nil {
		t.Fatalf("rsecho server under librspreload: %v; output:\n%s", err, srv.Wait().Out)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if listenwait.TCP(tctx, port) == nil {
		t.Fatalf("rsecho under librspreload listens on TCP port %d: the preload did not take its socket", port)
	}
}

// The harness itself: rsecho's client against rsecho's server, both under
// librspreload, must pass before the Go side's results against them mean
// anything.
func TestInteropRspreloadHarness(t *testing.T) {
	RequireDevice(t)
	prog, preload := rsecho(t)
	addr := localAddr()
	for i, sz := range rsechoSizes() {
		port := 18760 + i
		t.Run(fmt.Sprint(sz[0]), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			srv := startRsecho(t, ctx, "rsecho server", prog, preload, "server", addr, strconv.Itoa(port))
			rsechoListening(t, ctx, srv, port)
			cli := startRsecho(t, ctx, "rsecho client", prog, preload, "client", addr, strconv.Itoa(port), strconv.Itoa(sz[0]), strconv.Itoa(sz[1]))
			checkRsecho(t, cli.Wait(), fmt.Sprintf("verified %d bytes", sz[0]))
			checkRsecho(t, srv.Wait(), fmt.Sprintf("echoed %d bytes", sz[0]))
		})
	}
}

func checkRsecho(t *testing.T, run tooltest.Run, want string) {
	t.Helper()
	t.Logf("%s output:\n%s", run.Name, run.Out)
	if run.Failed() {
		t.Errorf("%s failed: exit %d, %s", run.Name, run.ExitCode, run.Err)
	}
	if !strings.Contains(run.Out, want+"\n") {
		t.Errorf("%s did not print %q", run.Name, want)
	}
}

// The Go client against rsecho's server under librspreload: the Go side
// writes rsecho's pattern from one goroutine and CloseWrites, checks the
// echo on another, and must read io.EOF right after the last byte (rsecho
// shuts down its side once it has read ours to the end).
func TestInteropRspreloadGoClient(t *testing.T) {
	RequireDevice(t)
	prog, preload := rsecho(t)
	addr := localAddr()
	for i, sz := range rsechoSizes() {
		port := 18770 + i
		t.Run(fmt.Sprint(sz[0]), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			srv := startRsecho(t, ctx, "rsecho server", prog, preload, "server", addr, strconv.Itoa(port))
			rsechoListening(t, ctx, srv, port)
			d := rsocket.Dialer{Timeout: 10 * time.Second}
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			if err != nil {
				cancel()
				t.Fatalf("dial rsecho: %v; its output:\n%s", err, srv.Wait().Out)
			}
			c.SetDeadline(time.Now().Add(interopTimeout))
			werr := make(chan error, 1)
			go func() {
				werr <- writeRsechoPattern(c, int64(sz[0]), sz[1])
			}()
			n, err := readRsechoPattern(c)
			if err == nil && n != int64(sz[0]) {
				err = fmt.Errorf("end of stream after %d bytes of %d", n, sz[0])
			}
			if err != nil {
				t.Errorf("Go client reading the echo: %v", err)
			}
			if err := <-werr; err != nil {
				t.Errorf("Go client writing: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if t.Failed() {
				cancel()
			}
			checkRsecho(t, srv.Wait(), fmt.Sprintf("echoed %d bytes", sz[0]))
		})
	}
}

// rsecho's client under librspreload against the Go server, which checks
// every byte as it echoes it and, at the client's end of stream,
// CloseWrites; rsecho checks the echo.
func TestInteropRspreloadGoServer(t *testing.T) {
	RequireDevice(t)
	prog, preload := rsecho(t)
	addr := localAddr()
	for _, sz := range rsechoSizes() {
		t.Run(fmt.Sprint(sz[0]), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			l, err := rsocket.Listen("tcp", net.JoinHostPort(addr, "0"))
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer l.Close()
			lport := l.Addr().(*net.TCPAddr).Port
			cli := startRsecho(t, ctx, "rsecho client", prog, preload, "client", addr, strconv.Itoa(lport), strconv.Itoa(sz[0]), strconv.Itoa(sz[1]))
			l.SetDeadline(time.Now().Add(30 * time.Second))
			c, err := l.AcceptConn()
			if err != nil {
				cancel()
				t.Fatalf("accept rsecho's client: %v; its output:\n%s", err, cli.Wait().Out)
			}
			c.SetDeadline(time.Now().Add(interopTimeout))
			n, err := echoChecked(c)
			if err == nil && n != int64(sz[0]) {
				err = fmt.Errorf("end of stream after %d bytes of %d", n, sz[0])
			}
			if err != nil {
				t.Errorf("Go server: %v", err)
			}
			if err := c.CloseWrite(); err != nil {
				t.Errorf("CloseWrite: %v", err)
			}
			run := cli.Wait()
			c.Close()
			checkRsecho(t, run, fmt.Sprintf("verified %d bytes", sz[0]))
		})
	}
}

// writeRsechoPattern writes total bytes of rsecho's pattern in writes of
// at most chunk bytes, then CloseWrites.
func writeRsechoPattern(c *rsocket.Conn, total int64, chunk int) error {
	buf := make([]byte, chunk)
	for off := int64(0); off < total; {
		n := int(min(int64(chunk), total-off))
		for i := range n {
			buf[i] = byte((off + int64(i)) % rsechoPeriod)
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
		off += int64(n)
	}
	return c.CloseWrite()
}

// readRsechoPattern reads to io.EOF, checking each byte against rsecho's
// pattern, and returns the count.
func readRsechoPattern(c *rsocket.Conn) (int64, error) {
	return consumeRsecho(c, nil)
}

// echoChecked is readRsechoPattern that also writes back every byte read.
func echoChecked(c *rsocket.Conn) (int64, error) {
	return consumeRsecho(c, c)
}

func consumeRsecho(r io.Reader, echo io.Writer) (int64, error) {
	buf := make([]byte, 64<<10)
	var got int64
	for {
		n, err := r.Read(buf)
		for i, v := range buf[:n] {
			if want := byte((got + int64(i)) % rsechoPeriod); v != want {
				return got, fmt.Errorf("byte %d is %d, want %d", got+int64(i), v, want)
			}
		}
		if echo != nil && n > 0 {
			if _, werr := echo.Write(buf[:n]); werr != nil {
				return got, fmt.Errorf("echo at %d: %w", got, werr)
			}
		}
		got += int64(n)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, fmt.Errorf("read after %d bytes: %w", got, err)
		}
	}
}
