package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePerf puts a perf first in PATH that runs script (sh) with perf's
// arguments; $ctl and $ack are the FIFOs of its --control argument, and
// $log a file it may write.
func fakePerf(t *testing.T, script string) (log string) {
	bin := t.TempDir()
	log = filepath.Join(bin, "log")
	prog := `#!/bin/sh
log=` + log + `
while [ $# -gt 0 ]; do
	case $1 in --control) spec=${2#fifo:}; ctl=${spec%,*}; ack=${spec#*,}; shift;; esac
	shift
done
` + script
	require.NoError(t, os.WriteFile(filepath.Join(bin, "perf"), []byte(prog), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// startRecording returns once perf has answered enable, however long its
// start takes, and stop ends it.
func TestStartRecordingWaitsForAck(t *testing.T) {
	log := fakePerf(t, `sleep 1
read cmd < "$ctl"
echo "$cmd" > "$log"
sleep 60 >/dev/null 2>&1 &
trap 'echo stopped >> "$log"; kill $!; exit 0' INT
printf 'ack\n\0' > "$ack"
wait
`)
	var out bytes.Buffer
	start := time.Now()
	rec, err := startRecording(t.TempDir(), &out, "-a")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "returned before perf's answer")
	got, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "enable\n", string(got))
	require.NoError(t, rec.stop())
	got, _ = os.ReadFile(log)
	assert.Equal(t, "enable\nstopped\n", string(got))
}

// A perf that ends before it records, that answers something else, or
// that never answers is an error saying so, with perf's output; none is
// left running.
func TestStartRecordingFailures(t *testing.T) {
	for _, c := range []struct{ name, script, want string }{
		{"exits", "echo no such event >&2; exit 129\n", "ended before it recorded"},
		{"answers nack", `read cmd < "$ctl"; printf 'nack\n' > "$ack"; sleep 60` + "\n", `answered "nack\n" to enable, not ack`},
		{"never answers", "sleep 60\n", "did not start recording within 500ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fakePerf(t, c.script)
			limit := perfStartLimit
			perfStartLimit = 500 * time.Millisecond
			t.Cleanup(func() { perfStartLimit = limit })
			var out bytes.Buffer
			start := time.Now()
			_, err := startRecording(t.TempDir(), &out, "-a")
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			if c.name == "exits" {
				assert.Contains(t, err.Error(), "no such event")
			}
			assert.Less(t, time.Since(start), 10*time.Second, "waited for the fake's sleep: perf was not killed")
		})
	}
}
