package hand

import "github.com/goverbs/goverbs/generated/verbs"

// Send flags for the Set methods of SendWRs, so that a program written
// against hand/ alone need not import the generated package.
const (
	// Signaled asks for a completion of this work request; without it a
	// successful send completes silently (the QP must allow that).
	Signaled = verbs.SendSignaled
	// Fence waits for earlier RDMA reads and atomics to complete first.
	Fence = verbs.SendFence
	// Solicited raises a solicited event at the receiver.
	Solicited = verbs.SendSolicited
	// Inline copies the payload into the work request: its buffer needs no
	// registration and may be reused as soon as the post returns.
	Inline = verbs.SendInline
)
