//go:build race

package hand

import "sync/atomic"

// inUse is atomic in a -race build, where it catches every overlap (see
// data_busy.go) and the race detector sees no race on the word itself.
type inUse struct{ w atomic.Uint32 }

// enter takes the word, or reports that another call holds it.
func (u *inUse) enter() bool { return u.w.CompareAndSwap(0, 1) }

// exit gives the word back.
func (u *inUse) exit() { u.w.Store(0) }
