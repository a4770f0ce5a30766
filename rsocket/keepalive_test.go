package rsocket

import (
	"testing"
	"time"
)

// Config.KeepAlive reads as net.Dialer's: 0 is the default, negative off.
func TestKeepAlivePeriod(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0:                     defaultKeepAlive,
		-1:                    0,
		-time.Hour:            0,
		20 * time.Millisecond: 20 * time.Millisecond,
		2 * time.Hour:         2 * time.Hour,
	} {
		if got := (Config{KeepAlive: in}).keepAlivePeriod(); got != want {
			t.Errorf("KeepAlive %v: period %v, want %v", in, got, want)
		}
	}
	if defaultKeepAlive != 15*time.Second {
		t.Errorf("the default KeepAlive is %v; the docs say 15 s", defaultKeepAlive)
	}
}
