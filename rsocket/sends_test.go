package rsocket

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSendLogCompletesThroughAnID(t *testing.T) {
	for _, start := range []uint32{0, math.MaxUint32 - 2} { // ids wrap
		l := newSendLog(4)
		l.next = start
		ids := []uint64{
			l.add(sent{kind: sendData, bytes: 10}),
			l.add(sent{kind: sendCtrl}),
			l.add(sent{kind: sendData, bytes: 30}),
		}
		kind, n, ok := l.through(ids[1])
		require.True(t, ok)
		require.Equal(t, sendCtrl, kind)
		require.Equal(t, 2, n, "the send and the one before it")
		require.Equal(t, sent{kind: sendData, bytes: 10}, l.pop())
		require.Equal(t, sent{kind: sendCtrl}, l.pop())

		_, _, ok = l.through(ids[0])
		require.False(t, ok, "an id already completed")
		ids = append(ids, l.add(sent{kind: sendProbe}), l.add(sent{kind: sendData, bytes: 50}))
		_, _, ok = l.through(ids[4] + 1)
		require.False(t, ok, "an id not posted yet")
		_, _, ok = l.through(1 << 32)
		require.False(t, ok, "not a send's id")

		kind, n, ok = l.through(ids[4])
		require.True(t, ok)
		require.Equal(t, sendData, kind)
		require.Equal(t, 3, n)
		var bytes uint32
		for range n {
			bytes += l.pop().bytes
		}
		require.Equal(t, uint32(80), bytes)
		require.Zero(t, l.n)
	}
}
