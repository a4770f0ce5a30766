package perf

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sidePair is a connected side channel over loopback TCP: ours and the
// peer's end.
func sidePair(t *testing.T) (ours, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	ours, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { ours.Close(); peer.Close() })
	return ours, peer
}

// testWatch is a peerWatch on ours with a loop that has made progress
// completions, and an abort that says when it was called.
type testWatch struct {
	*peerWatch
	progress atomic.Int64
	aborts   chan struct{}
}

func newTestWatch(t *testing.T, ours net.Conn, timeout time.Duration) *testWatch {
	old := peerTimeout
	peerTimeout = timeout
	t.Cleanup(func() { peerTimeout = old })
	tw := &testWatch{aborts: make(chan struct{}, 1)}
	tw.peerWatch = newPeerWatch(ours, tw.progress.Load, func() error {
		tw.aborts <- struct{}{}
		return nil
	})
	t.Cleanup(tw.release)
	return tw
}

// aborted waits up to d for the watch to abort the loop.
func (tw *testWatch) aborted(d time.Duration) bool {
	if d == 0 {
		select {
		case <-tw.aborts:
			return true
		default:
			return false
		}
	}
	select {
	case <-tw.aborts:
		return true
	case <-time.After(d):
		return false
	}
}

// errFlushedLoop is what a loop whose QP the watch moved to ERR returns.
var errFlushedLoop = errors.New("receive 7: work request flushed error")

// A peer that exits during the loop closes the side channel: the watch
// ends the loop at once, and the loop's error says why.
func TestPeerWatchClosed(t *testing.T) {
	ours, peer := sidePair(t)
	w := newTestWatch(t, ours, time.Hour)
	w.start()
	peer.Close()
	if !w.aborted(5 * time.Second) {
		t.Fatal("the peer closed the side channel; the loop was not ended within 5 s")
	}
	err := w.stop(errFlushedLoop)
	if err == nil || !strings.Contains(err.Error(), "the peer closed the side channel before the end sync") || !errors.Is(err, errFlushedLoop) {
		t.Fatalf("stop: %v; want the peer's close, then the loop's error", err)
	}
}

// Nothing completing for peerTimeout ends the loop, as perftest's
// check_alive ends a send_bw server's; the peer's TCP side is still open.
func TestPeerWatchStalled(t *testing.T) {
	ours, _ := sidePair(t)
	w := newTestWatch(t, ours, 100*time.Millisecond)
	w.progress.Store(42)
	start := time.Now()
	w.start()
	if !w.aborted(5 * time.Second) {
		t.Fatal("nothing completed; the loop was not ended within 5 s")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("ended after %v, before the timeout of 100ms", d)
	}
	err := w.stop(errFlushedLoop)
	if err == nil || !strings.Contains(err.Error(), "nothing completed in 100ms, 42 completions in") || !errors.Is(err, errFlushedLoop) {
		t.Fatalf("stop: %v; want the stall, then the loop's error", err)
	}
}

// A loop that keeps completing is left alone however long it runs; the
// peer's end sync byte, come while it runs, is endSync's.
func TestPeerWatchProgress(t *testing.T) {
	ours, peer := sidePair(t)
	w := newTestWatch(t, ours, 100*time.Millisecond)
	w.start()
	for i := range 40 {
		if i == 20 { // the peer's loop is done first
			if _, err := peer.Write(syncByte); err != nil {
				t.Fatal(err)
			}
		}
		w.progress.Add(1)
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.stop(nil); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if w.aborted(0) {
		t.Fatal("the loop was ended while it made progress")
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 1)
		peer.Read(b)
		got <- b
	}()
	if err := w.endSync(ours, make([]byte, 1)); err != nil {
		t.Fatalf("endSync: %v", err)
	}
	if b := <-got; b[0] != syncByte[0] {
		t.Fatalf("the peer read %v, want the sync byte", b)
	}
}

// Once the loop has ended, a peer that goes away is the end sync's to
// report, and the loop is not ended.
func TestPeerWatchAfterLoop(t *testing.T) {
	ours, peer := sidePair(t)
	w := newTestWatch(t, ours, 50*time.Millisecond)
	w.start()
	if err := w.stop(nil); err != nil {
		t.Fatalf("stop: %v", err)
	}
	time.Sleep(150 * time.Millisecond) // past the timeout: no progress, but the loop is over
	peer.Close()
	err := w.endSync(ours, make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "the peer closed the side channel before the end sync") &&
		!strings.Contains(err.Error(), "the peer reset the side channel before the end sync") {
		t.Fatalf("endSync: %v; want the peer's close", err)
	}
	if w.aborted(100 * time.Millisecond) {
		t.Fatal("the watch ended a loop that was over")
	}
}

// A watch released before its loop began (Run failed on the way) ends with
// the side channel, and aborts nothing.
func TestPeerWatchRelease(t *testing.T) {
	ours, _ := sidePair(t)
	w := newTestWatch(t, ours, time.Hour)
	w.release()
	ours.Close()
	select {
	case <-w.got:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch's goroutine did not end with the side channel")
	}
	if w.aborted(0) {
		t.Fatal("a released watch ended the loop")
	}
	if err := w.stop(nil); err != nil {
		t.Fatalf("stop after release: %v", err)
	}
}

// A write_bw or read_bw server runs no loop: its end sync byte comes as
// the client's loop starts, and the watch goes on, so that the server's
// end still ends the client's loop at once.
func TestPeerWatchClosedAfterItsSync(t *testing.T) {
	ours, peer := sidePair(t)
	w := newTestWatch(t, ours, time.Hour)
	w.start()
	if _, err := peer.Write(syncByte); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	peer.Close()
	if !w.aborted(5 * time.Second) {
		t.Fatal("the peer closed the side channel after its end sync; the loop was not ended within 5 s")
	}
	err := w.stop(errFlushedLoop)
	if err == nil || !strings.Contains(err.Error(), "the side channel before our end sync") || !errors.Is(err, errFlushedLoop) {
		t.Fatalf("stop: %v; want the peer's close before our end sync, then the loop's error", err)
	}
}
