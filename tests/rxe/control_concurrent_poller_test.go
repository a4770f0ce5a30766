package rxe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

// One Poller shared by two goroutines on a real CQ, which the race detector
// cannot see (a poll writes only the WC array, in C memory): while one
// goroutine waits on the poller for a completion (Wait parked on the
// netpoller, WaitThread and WaitThreadAtLeast blocked in the channel's
// read), the other's Poll, Wait and Close return ErrConcurrentUse and reap
// and free nothing. The completions of the send that follows then come
// out each exactly once, between the wait and the other goroutine's polls
// after it, and the poller serves the other goroutine again once the wait
// has returned.
func TestConcurrentPollerSharedFails(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	p, err := hand.NewPoller(r.cq, 4)
	require.NoError(t, err)
	defer p.Close()
	ways := []struct {
		name string
		wait func(ctx context.Context) ([]hand.WC, error)
	}{
		{"Wait", p.Wait},
		{"WaitThread", p.WaitThread},
		{"WaitThreadAtLeast", func(ctx context.Context) ([]hand.WC, error) { return p.WaitThreadAtLeast(ctx, 1) }},
	}
	for i, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			recvID, sendID := uint64(100+i), uint64(200+i)
			ctlPostRecv(t, b, r.mr, recvID, 1, 0, 64)

			type result struct {
				ids     []uint64
				err     error
				refused int // waits refused because this goroutine was polling
			}
			done := make(chan result, 1)
			ctx := ctlContext(t, 30*time.Second)
			go func() {
				var res result
				for {
					wcs, err := way.wait(ctx)
					if errors.Is(err, hand.ErrConcurrentUse) {
						res.refused++ // the other goroutine's Poll was under way: go again
						continue
					}
					res.err = err
					for i := range wcs {
						if !wcs[i].OK() && res.err == nil {
							res.err = fmt.Errorf("completion %d: %s", wcs[i].WRID(), wcs[i].StatusString())
						}
						res.ids = append(res.ids, wcs[i].WRID())
					}
					done <- res
					return
				}
			}()

			// Poll until the wait holds the poller: the CQ is empty until
			// the send below, so these polls reap nothing.
			var refused error
			deadline := time.Now().Add(20 * time.Second)
			for refused == nil {
				wcs, err := p.Poll()
				if err != nil {
					refused = err
					break
				}
				require.Empty(t, wcs, "a completion before any send")
				require.True(t, time.Now().Before(deadline), "the %s never held the poller", way.name)
				time.Sleep(50 * time.Microsecond)
			}
			require.ErrorIs(t, refused, hand.ErrConcurrentUse)
			require.Contains(t, refused.Error(), "Poller.Poll")
			short, cancel := context.WithTimeout(context.Background(), time.Second)
			wcs, err := p.Wait(short)
			cancel()
			require.ErrorIs(t, err, hand.ErrConcurrentUse, "Wait while the %s waits", way.name)
			require.Nil(t, wcs)
			require.ErrorIs(t, p.Close(), hand.ErrConcurrentUse, "Close while the %s waits", way.name)

			ctlPostSend(t, a, r.mr, sendID, 1024, 64)
			var res result
			select {
			case res = <-done:
			case <-time.After(25 * time.Second):
				t.Fatalf("the %s did not return after the send", way.name)
			}
			require.NoError(t, res.err, way.name)
			require.NotEmpty(t, res.ids, "the %s returned no completion", way.name)
			t.Logf("%s: reaped %v; waits refused while this goroutine polled: %d", way.name, res.ids, res.refused)

			// The rest, from this goroutine, with the poller free again.
			got := res.ids
			deadline = time.Now().Add(10 * time.Second)
			for len(got) < 2 {
				wcs, err := p.Poll()
				require.NoError(t, err, "Poll once the wait returned")
				for i := range wcs {
					got = append(got, wcs[i].WRID())
				}
				require.True(t, time.Now().Before(deadline), "completions %v after 10 s, want the send's and the receive's", got)
				if len(wcs) == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
			slices.Sort(got)
			require.Equal(t, []uint64{recvID, sendID}, got, "each completion exactly once")
		})
	}
}
