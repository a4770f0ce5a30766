package cmtime

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The client's layers and their flags: -shared needs hand or step, -b an
// IP address; a bad combination is a usage error (2) before anything runs.
func TestMainFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-layer", "bogus", "-s", "192.0.2.1"}, "-layer hand, step or raw"},
		{[]string{"-layer", "raw", "-shared", "-s", "192.0.2.1"}, "-shared needs -layer hand or step"},
		{[]string{"-layer", "step", "-b", "not-an-ip", "-s", "192.0.2.1"}, "-b:"},
	} {
		var out, errb strings.Builder
		require.Equal(t, 2, Main(tc.args, &out, &errb), "%v", tc.args)
		require.Contains(t, errb.String(), tc.want, "%v", tc.args)
	}
}

// The table the step client prints is the one -compare reads back, "bind
// addr" included, row for row.
func TestTableRoundTrip(t *testing.T) {
	tm := newTimings(2)
	base := time.Now()
	for _, s := range []int{stepCreateID, stepBind, stepResolveAddr, stepResolveRoute, stepCreateQP, stepConnect, stepDisconnect, stepDestroy} {
		tm.start(s)
		tm.total[s][0] = base
		for i := range tm.per {
			tm.per[i][s] = [2]time.Time{base, base.Add(time.Duration(s+i+1) * time.Millisecond)}
		}
		tm.total[s][1] = base.Add(time.Duration(s+2) * time.Millisecond)
	}
	var b strings.Builder
	tm.print(&b)
	steps, err := parseTable(b.String())
	require.NoError(t, err)
	require.Len(t, steps, 8, b.String())
	// us/conn: the step's wall time over 2 connections.
	require.InDelta(t, float64((stepBind+2)*1000)/2, steps["bind addr"], 0.01)
	require.InDelta(t, float64((stepDestroy+2)*1000)/2, steps["destroy"], 0.01)
}
