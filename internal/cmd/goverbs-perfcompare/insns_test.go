package main

import (
	"os"
	"path/filepath"
	"testing"
)

// runs.txt: five fields as first written, six since the client's rate is
// kept; anything else names the file and line.
func TestReadRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.txt")
	if err := os.WriteFile(path, []byte("0 c send_bw 64 5000\n2 go send_bw 64 20000 33060.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := readRuns(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []insnRun{{0, "c", "send_bw", 64, 5000, 0}, {2, "go", "send_bw", 64, 20000, 33060.5}}
	if len(runs) != len(want) || runs[0] != want[0] || runs[1] != want[1] {
		t.Errorf("runs %+v, want %+v", runs, want)
	}
	for _, bad := range []string{"0 c send_bw 64\n", "0 c send_bw 64 5000 fast\n", "0 c send_bw 64 5000 1 2\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readRuns(path); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The time a message is the difference of the two runs' loops over the
// difference of their messages: what a run costs once drops out.
func TestNsPerMessage(t *testing.T) {
	// 5,000 messages in 0.2 s and 20,000 in 0.65 s: 30 us a message.
	short := insnRun{iters: 5000, rate: 5000 / 0.2}
	long := insnRun{iters: 20000, rate: 20000 / 0.65}
	if got := nsPerMessage(short, long); got < 29999.9 || got > 30000.1 {
		t.Errorf("%.1f ns a message, want 30000", got)
	}
	if got := nsPerMessage(insnRun{iters: 5000}, long); got != 0 {
		t.Errorf("%.1f ns a message without the short run's rate, want 0", got)
	}
}
