//go:build !race

package hand

// inUse is a plain word here: see data_busy.go for why, and what it
// catches.
type inUse struct{ w uint32 }

// enter takes the word, or reports that another call holds it.
func (u *inUse) enter() bool {
	if u.w != 0 {
		return false
	}
	u.w = 1
	return true
}

// exit gives the word back.
func (u *inUse) exit() { u.w = 0 }
