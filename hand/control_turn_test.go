package hand

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// queued waits until n waiters are queued on t.
func queued(t *testing.T, tr *turn, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.waiters) == n
	}, 5*time.Second, time.Millisecond, "%d waiters queued", n)
}

// finishes waits for wg, failing t when that takes 10 s: a turn that is
// never released leaves its waiters blocked.
func finishes(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waiters still blocked after 10 s: the turn was lost")
	}
}

// free says whether the turn can be taken now, and leaves it free.
func free(tr *turn) bool {
	if !tr.tryAcquire() {
		return false
	}
	tr.release()
	return true
}

func TestTurnHandsOverInArrivalOrder(t *testing.T) {
	var tr turn
	require.True(t, tr.tryAcquire())
	require.False(t, tr.tryAcquire(), "taken twice")
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if err := tr.acquire(context.Background()); err != nil {
				t.Errorf("acquire: %v", err) // not require: this is not the test's goroutine
				return
			}
			order <- i
			tr.release()
		})
		queued(t, &tr, i+1)
	}
	tr.release()
	finishes(t, &wg)
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	require.Equal(t, []int{0, 1, 2}, got)
	require.True(t, free(&tr), "the last release frees the turn")
}

func TestTurnWaiterGivesUp(t *testing.T) {
	var tr turn
	require.NoError(t, tr.acquire(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, tr.acquire(ctx), context.DeadlineExceeded)
	require.Empty(t, tr.waiters, "a waiter that gave up stays queued")
	require.False(t, tr.tryAcquire(), "giving up released the holder's turn")
	tr.release()
	require.True(t, free(&tr))
}

// A waiter whose context ends as the turn is handed to it passes the turn
// on: dropping it would leave the fd held for good.
func TestTurnHandOverToWaiterGivingUp(t *testing.T) {
	var tr turn
	for i := range 200 {
		require.True(t, tr.tryAcquire())
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- tr.acquire(ctx) }()
		queued(t, &tr, 1)
		cancel()
		tr.release()
		var err error
		select {
		case err = <-res:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter is still blocked after 10 s", i)
		}
		if err == nil {
			tr.release() // it had the turn before it saw ctx end
		} else {
			require.ErrorIs(t, err, context.Canceled)
		}
		require.True(t, free(&tr), "round %d: turn still held", i)
	}
}

// Holders never overlap, whoever gives up, and the turn ends free.
func TestTurnExclusiveUnderCancels(t *testing.T) {
	var tr turn
	var holders, got, gaveUp atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 300 {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if rand.IntN(2) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(50))*time.Microsecond)
				}
				if err := tr.acquire(ctx); err != nil {
					gaveUp.Add(1)
					cancel()
					continue
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				got.Add(1)
				runtime.Gosched()
				holders.Add(-1)
				tr.release()
				cancel()
			}
		})
	}
	finishes(t, &wg)
	require.Equal(t, int32(16*300), got.Load()+gaveUp.Load())
	require.Positive(t, gaveUp.Load(), "no waiter gave up: the test did not test that")
	require.Empty(t, tr.waiters)
	require.True(t, free(&tr))
}

// A turn nobody else wants is taken and given back without its lock, which
// a waiter would need.
func TestTurnUncontendedSkipsLock(t *testing.T) {
	var tr turn
	tr.mu.Lock()
	defer tr.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tr.acquire(context.Background()) != nil {
			panic("acquire")
		}
		tr.release()
		if !tr.tryAcquire() {
			panic("tryAcquire")
		}
		tr.release()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("an uncontended acquire and release waited for the turn's lock")
	}
	require.Equal(t, turnFree, tr.state.Load())
}

func TestTurnUncontendedNoAllocs(t *testing.T) {
	var tr turn
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if tr.acquire(ctx) != nil || tr.tryAcquire() {
			panic("turn")
		}
		tr.release()
	})
	require.Zero(t, allocs)
}
