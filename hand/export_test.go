package hand

import "unsafe"

// PollExReader is goverbs_poll_ex, the C loop ExPoller.Poll crosses into,
// for cbench.PollEx: the benchmark's C side then runs the same code.
func PollExReader() unsafe.Pointer { return pollExReader() }

// Buffers are the poller's C arrays of completions and timestamps, and its
// failure slot.
func (p *ExPoller) Buffers() (wc, ts, fail unsafe.Pointer) {
	return unsafe.Pointer(&p.wc[0]), unsafe.Pointer(&p.ts[0]), unsafe.Pointer(p.fail)
}
