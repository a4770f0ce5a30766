package loopallocs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	for _, r := range []Report{
		{Own: 0, Runtime: 7},
		{Own: 3, Runtime: 0, Sites: []string{"main.f main.go:10 x2", "main.g main.go:20 x1"}},
	} {
		var b strings.Builder
		b.WriteString("a result row\n")
		Write(&b, r)
		b.WriteString("after\n")
		got, ok, err := Parse(b.String())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, r, got)
	}
	var b strings.Builder
	Write(&b, Report{Runtime: 7})
	require.Equal(t, " heap allocations in the timed loop: 0 (and 7 by the Go runtime alone)\n", b.String())
}

func TestParseMissingOrBad(t *testing.T) {
	_, ok, err := Parse("no report here\n")
	require.False(t, ok)
	require.NoError(t, err)
	_, ok, err = Parse(" heap allocations in the timed loop: x (and 0 by the Go runtime alone)\n")
	require.True(t, ok)
	require.Error(t, err)
}
