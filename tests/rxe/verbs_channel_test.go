package rxe

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/tests/internal/testkit"
)

// A goroutine blocked in ibv_get_cq_event (a read(2) on the completion
// channel, seen in /proc while it waits) wakes when a message arrives on
// the armed CQ, and returns that CQ; the completion is then there to poll.
func TestVerbsCompletionChannelWakesWaiter(t *testing.T) {
	e := openVerbs(t)
	p := e.rcPair(t, 4, 1)
	src, dst := e.mr(t, 4096), e.mr(t, 4096)
	fill(src.buf, 12)

	rc := testkit.RecvChain(t, 1, 1)
	rc.Reserve(1).Set(0, 90, dst.sge(0, 4096))
	if err := rc.PostRecvRaw(p.b); err != nil {
		t.Fatalf("post recv: %v", err)
	}
	if err := verbs.ReqNotifyCQ(p.bcq.cq, 0); err != nil {
		t.Fatal(err)
	}
	p.bcq.expectEmpty(t) // nothing arrived before the arm

	type event struct {
		err error
		cq  *verbs.CQ
		at  time.Time
	}
	woke := make(chan event, 1)
	go func() {
		var cq *verbs.CQ
		var ctx unsafe.Pointer
		err := verbs.GetCQEvent(p.bcq.ch, &cq, &ctx)
		woke <- event{err, cq, time.Now()}
	}()
	blocked := waitBlockedInRead(t, p.bcq.ch.FD)
	select {
	case ev := <-woke:
		t.Fatalf("ibv_get_cq_event returned (%v) before anything was sent", ev.err)
	default:
	}
	t.Logf("waiter blocked in read(2) on completion channel fd %d (thread %s)", p.bcq.ch.FD, blocked)

	sent := time.Now()
	sc := testkit.SendChain(t, 1, 1)
	sc.Reserve(1).SetSend(0, 91, verbs.SendSignaled, src.sge(0, 1234))
	if err := sc.PostSendRaw(p.a); err != nil {
		t.Fatalf("post send: %v", err)
	}
	var ev event
	select {
	case ev = <-woke:
	case <-time.After(vTimeout):
		t.Fatalf("the waiter in ibv_get_cq_event did not wake within %v of a completion", vTimeout)
	}
	if ev.err != nil || ev.cq != p.bcq.cq {
		t.Fatalf("ibv_get_cq_event: %v, cq %p; want nil and %p", ev.err, ev.cq, p.bcq.cq)
	}
	verbs.ACKCQEvents(ev.cq, 1)
	t.Logf("waiter woke %v after the post", ev.at.Sub(sent))

	w, err := p.bcq.poller.Poll()
	if err != nil || len(w) != 1 || !w[0].OK() || w[0].WRID() != 90 || w[0].ByteLen() != 1234 {
		t.Fatalf("after the event, poll: %s, %v; want wr_id 90, 1234 bytes", testkit.DescribeWCs(w), err)
	}
	testkit.SameBytes(t, "received", dst.buf[:1234], src.buf[:1234])
	mustOK(t, p.acq.reap(t, 1))
}

// waitBlockedInRead returns the id of a thread of this process blocked in
// read(2) on fd, waiting up to vTimeout for one.
func waitBlockedInRead(t *testing.T, fd int32) string {
	t.Helper()
	return waitBlockedIn(t, fmt.Sprintf("read(2) on fd %d", fd), 0, uint64(fd), syscall.SYS_READ)
}

// waitBlockedIn returns the id of a thread of this process blocked in one
// of the system calls nrs whose argument arg (0-based) is v, as
// /proc/self/task/*/syscall shows it ("232 0x5 0x7f... 0x2 ..."), waiting
// up to vTimeout for one; what names it in the failure.
func waitBlockedIn(t *testing.T, what string, arg int, v uint64, nrs ...int) string {
	t.Helper()
	wantArg := fmt.Sprintf("0x%x", v)
	deadline := time.Now().Add(vTimeout)
	for time.Now().Before(deadline) {
		tasks, err := filepath.Glob("/proc/self/task/*/syscall")
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range tasks {
			b, err := os.ReadFile(path)
			if err != nil {
				continue // the thread exited
			}
			f := strings.Fields(string(b))
			if len(f) <= arg+1 || f[arg+1] != wantArg {
				continue
			}
			for _, nr := range nrs {
				if f[0] == strconv.Itoa(nr) {
					return filepath.Base(filepath.Dir(path))
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no thread blocked in %s after %v", what, vTimeout)
	return ""
}
