package listenwait

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /proc/net/tcp excerpt: a listener on 0.0.0.0:7174 (0x1C06), a
// connection from port 18515 (0x4853) and a TIME_WAIT socket on 18620
// (0x48BC).
const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1C06 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 20157 1 0000000000000000 100 0 0 10 0
   1: 0100007F:4853 0100007F:1C06 01 00000000:00000000 00:00000000 00000000     0        0 20160 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:48BC 0100007F:1C06 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
`

func TestTCPListens(t *testing.T) {
	for _, c := range []struct {
		port int
		want bool
	}{
		{7174, true},
		{18515, false}, // connected, not listening
		{18620, false}, // in TIME_WAIT
		{7175, false},
	} {
		assert.Equal(t, c.want, tcpListens([]byte(procNetTCP), c.port), "port %d", c.port)
	}
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, TCP(ctx, port), "a listener on port %d", port)

	// Closed, the port must not count as listening: the error says which
	// port and for how long, and wraps the context's error.
	l.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = TCP(ctx, port)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Regexp(t, `^nothing listens on TCP port `+strconv.Itoa(port)+` after [0-9.]+m?s: context deadline exceeded$`, err.Error())
}

// rdma resource show cm_id's lines: the first as the soft-RoCE VM printed
// it for `rping -s -p 7174`, the others made from it: the accepted id of a
// connection to 7174, and a listener on 17174.
const cmIDs = `link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 148 comm rping src-addr 192.0.2.1:7174 dst-addr 0.0.0.0:0 
link rxe0/1 cm-idn 1 state CONNECT ps TCP pid 148 comm rping src-addr 192.0.2.1:7174 dst-addr 192.0.2.1:40000 
`

func TestCMListens(t *testing.T) {
	assert.True(t, cmListens([]byte(cmIDs), 7174))
	assert.False(t, cmListens([]byte(cmIDs), 40000), "a connected id's port")
	assert.False(t, cmListens([]byte(cmIDs), 717), "a prefix of the listener's port")
	assert.False(t, cmListens([]byte(strings.ReplaceAll(cmIDs, ":7174", ":17174")), 7174), "a listener on 17174")
	assert.False(t, cmListens(nil, 7174))
}
