package perf

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// -e -wait netpoll restarts with schedtrace added to GODEBUG, keeping the
// rest of the environment and of GODEBUG, unless the run does not wait for
// events, waits on the thread, asks for the runtime's default, or GODEBUG
// sets schedtrace (the restarted process has it, so it does not restart
// again).
func TestSysmonAwakeEnv(t *testing.T) {
	events := Config{Events: true, Wait: NetpollWait}
	for _, c := range []struct {
		name    string
		cfg     Config
		environ []string
		want    []string // nil: no restart
	}{
		{"no GODEBUG", events, []string{"HOME=/root", "PATH=/bin"},
			[]string{"HOME=/root", "PATH=/bin", "GODEBUG=schedtrace=2147483647"}},
		{"other settings kept", events, []string{"GODEBUG=madvdontneed=1", "PATH=/bin"},
			[]string{"PATH=/bin", "GODEBUG=madvdontneed=1,schedtrace=2147483647"}},
		{"empty GODEBUG", events, []string{"GODEBUG="}, []string{"GODEBUG=schedtrace=2147483647"}},
		{"the first GODEBUG counts", events, []string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=5"},
			[]string{"GODEBUG=gctrace=1,schedtrace=2147483647"}},
		{"the first GODEBUG sets it", events, []string{"GODEBUG=schedtrace=5", "GODEBUG=gctrace=1"}, nil},
		{"restarted already", events, []string{"GODEBUG=madvdontneed=1,schedtrace=2147483647"}, nil},
		{"the user's schedtrace", events, []string{"GODEBUG=schedtrace=0"}, nil},
		{"busy-polling", Config{}, []string{"PATH=/bin"}, nil},
		{"-sysmon-nap", Config{Events: true, Wait: NetpollWait, SysmonNap: true}, []string{"PATH=/bin"}, nil},
		{"waits on the thread", Config{Events: true, Wait: ThreadWait}, []string{"PATH=/bin"}, nil},
	} {
		got, restart := sysmonAwakeEnv(c.cfg, c.environ)
		if restart != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("%s: sysmonAwakeEnv(%+v, %q) = %q, %v; want %q", c.name, c.cfg, c.environ, got, restart, c.want)
		}
	}
}

// The report names what the process runs with.
func TestReportSysmon(t *testing.T) {
	for _, c := range []struct{ godebug, want string }{
		{"madvdontneed=1,schedtrace=2147483647", " sysmon: awake (GODEBUG schedtrace=2147483647)"},
		{"schedtrace=2147483647,schedtrace=0", " sysmon: sleeps"},
		{"", " sysmon: sleeps"},
	} {
		t.Setenv("GODEBUG", c.godebug)
		var out bytes.Buffer
		reportSysmon(&out)
		if !strings.HasPrefix(out.String(), c.want) {
			t.Errorf("GODEBUG=%s: reported %q, want it to begin %q", c.godebug, out.String(), c.want)
		}
	}
}
