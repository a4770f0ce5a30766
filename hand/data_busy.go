package hand

import "errors"

// ErrConcurrentUse is what errors.Is matches when a call of a SendChain,
// RecvChain, Poller or ExPoller found another goroutine in a call of the
// same chain or poller (always in a -race build, on a best-effort basis
// otherwise: see the package documentation, Concurrency). The call that
// found it did nothing: it left the chain's pending WRs and the poller's
// completions as the other call leaves them, posted nothing and reaped
// nothing. It is a bug of the program, not of the device: a chain or a
// poller is for one goroutine at a time.
var ErrConcurrentUse = errors.New("goverbs: chain or poller in use by another goroutine")

// The in-use word of a chain or a poller (inUse: inuse_norace.go,
// inuse_race.go). Each call that reads or writes the object's per-call state
// (the pending WRs, the bad_wr slot, the reaped WCs, the reused error) takes
// it first, before it reads anything else of the object, and gives it back
// as it returns; a call that finds it taken returns its usedError untouched.
//
// Built without -race, it is a plain word (inuse_norace.go): a load, a
// compare and two stores a call, whatever the number of WRs or completions,
// where an atomic compare-and-swap and store (lock cmpxchg, xchg) cost 10-14
// ns a call more on the 2-core benchmark machine, about a third of what Go
// adds to C at one WR (docs/performance.md). The check is then best effort,
// as the runtime's "concurrent map writes" is: a call that is under way is
// seen (its store is visible once it crosses into C, which fences), but two
// calls that start within a few nanoseconds of each other can both pass it.
// Built with -race (inuse_race.go) it is atomic and catches every overlap,
// which the race detector cannot see itself: the WRs and WCs are C memory.
// Neither sees a goroutine reading WCs another goroutine's Poll is about to
// overwrite, nor the views' Set methods, which write C memory with no call
// to check in.

// usedError is ErrConcurrentUse as one method returns it, made once at
// init so that the refusal does not allocate either.
type usedError struct{ msg string }

func (e *usedError) Error() string { return e.msg }

// Unwrap returns ErrConcurrentUse.
func (e *usedError) Unwrap() error { return ErrConcurrentUse }

func used(obj, method string) *usedError {
	return &usedError{"goverbs: " + obj + "." + method + ": another goroutine is in a call of this " + obj +
		": a " + obj + " is for one goroutine at a time (hand it over through a channel or a mutex)"}
}

// One value per method, so that the message names the one the program
// called.
var (
	usedPostRecv       = used("RecvChain", "PostRecv")
	usedPostRecvRaw    = used("RecvChain", "PostRecvRaw")
	usedPostSRQRecv    = used("RecvChain", "PostSRQRecv")
	usedPostSRQRecvRaw = used("RecvChain", "PostSRQRecvRaw")
	usedPostRecvv      = used("RecvChain", "PostRecvv")
	usedPostRecvvRaw   = used("RecvChain", "PostRecvvRaw")
	usedRecvClose      = used("RecvChain", "Close")

	usedPostSend      = used("SendChain", "PostSend")
	usedPostSendRaw   = used("SendChain", "PostSendRaw")
	usedPostSendv     = used("SendChain", "PostSendv")
	usedPostSendvRaw  = used("SendChain", "PostSendvRaw")
	usedPostReadv     = used("SendChain", "PostReadv")
	usedPostReadvRaw  = used("SendChain", "PostReadvRaw")
	usedPostWritev    = used("SendChain", "PostWritev")
	usedPostWritevRaw = used("SendChain", "PostWritevRaw")
	usedSendClose     = used("SendChain", "Close")

	usedPoll              = used("Poller", "Poll")
	usedPollSpin          = used("Poller", "PollSpin")
	usedWait              = used("Poller", "Wait")
	usedWaitThread        = used("Poller", "WaitThread")
	usedWaitThreadAtLeast = used("Poller", "WaitThreadAtLeast")
	usedPollerClose       = used("Poller", "Close")

	usedExPoll      = used("ExPoller", "Poll")
	usedExPollSpin  = used("ExPoller", "PollSpin")
	usedExPollClose = used("ExPoller", "Close")
)
