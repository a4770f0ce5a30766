package hand

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Lifetimes of the control-path objects.
//
// Every object (Context, PD, MR, CompChannel, CQ, QP, SRQ, AH, MW, Listener,
// Conn) embeds an object, which gives it three guarantees:
//
//   - Close is idempotent: the second and later calls return nil.
//   - Any method called after Close returns ErrClosed, never touches freed C
//     memory, and never crashes; a method racing with Close either completes
//     before the C object is destroyed or returns ErrClosed.
//   - Close on an object that live children depend on (a PD with an MR, a
//     CQ that a QP uses) closes nothing and returns a *BusyError naming
//     them. Children are never closed implicitly, in order: the caller
//     decides when memory a peer may still write into goes away.
//
// No finalizer frees anything: an object that becomes unreachable without
// Close leaks its C resources (the device may still DMA into its memory,
// and only the program knows when that has stopped).
//
// Raw pointers (the Raw methods) are outside this protection: they are valid
// until Close, and using one after Close is the caller's bug.

// objectSeq orders objects by creation: an object holds its parents in this
// order (parents are always older), so two goroutines creating children of
// overlapping parents while a third closes one cannot deadlock.
var objectSeq atomic.Uint64

type object struct {
	mu     sync.RWMutex // read-held by each use, write-held by Close
	closed bool
	seq    uint64
	label  string // "PD 0x3", for BusyError
	parent []*object

	childMu  sync.Mutex // guards children; a leaf lock, never held while taking another
	children []*object
}

// init labels o and registers it as a child of each parent. The caller holds
// every parent (use or useAll) across the creation of the C object and init.
func (o *object) init(label string, parents ...*object) {
	o.seq = objectSeq.Add(1)
	o.label = label
	for _, p := range parents {
		if p == nil || slices.Contains(o.parent, p) {
			continue
		}
		o.parent = append(o.parent, p)
		p.childMu.Lock()
		p.children = append(p.children, o)
		p.childMu.Unlock()
	}
}

// use read-locks o for one operation; it fails with ErrClosed after Close.
// Each successful use is paired with done.
func (o *object) use() error {
	o.mu.RLock()
	if o.closed {
		o.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (o *object) done() { o.mu.RUnlock() }

// useAll uses every non-nil object, oldest first, and returns the function
// that releases them. On error nothing stays held.
func useAll(objs ...*object) (release func(), err error) {
	held := make([]*object, 0, len(objs))
	for _, o := range objs {
		if o != nil && !slices.Contains(held, o) {
			held = append(held, o)
		}
	}
	slices.SortFunc(held, func(a, b *object) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	for i, o := range held {
		if err := o.use(); err != nil {
			for _, h := range held[:i] {
				h.done()
			}
			return nil, err
		}
	}
	return func() {
		for _, h := range held {
			h.done()
		}
	}, nil
}

// busy returns a *BusyError if live children depend on o.
func (o *object) busy() error {
	o.childMu.Lock()
	defer o.childMu.Unlock()
	if len(o.children) == 0 {
		return nil
	}
	e := &BusyError{Object: o.label}
	for _, c := range o.children {
		e.Children = append(e.Children, c.label)
	}
	return e
}

// busyOwned is busy for what an rdma_cm connection or listener made for
// itself (its own Context wrapper, PD, CQ, completion channel, QP): a
// *BusyError on label listing every child of those that is not one of
// them, each once. Those children would make the teardown fail half-way.
func busyOwned(label string, owned ...*object) error {
	var children []string
	for _, o := range owned {
		o.childMu.Lock()
		for _, c := range o.children {
			if !slices.Contains(owned, c) && !slices.Contains(children, c.label) {
				children = append(children, c.label)
			}
		}
		o.childMu.Unlock()
	}
	if len(children) > 0 {
		return &BusyError{Object: label, Children: children}
	}
	return nil
}

// outlast is for a call that holds o (use) and that the interrupt of a
// Close of o woke with ErrClosed: a wait, parked holding o, which Close
// must wake before it can take o. That Close may yet fail: a child made
// after its first look at o's children makes it a *BusyError, and undo
// reverts the interrupt. So the call lets go of o until the Close is
// over, and returns ErrClosed only if it closed o; when it failed,
// outlast returns nil holding o again, and the call waits on. closing
// reports whether the interrupt is still in force; it is true until the
// Close that set it takes o, which cannot happen while the caller holds
// o, and so, when outlast returns nil, it was undone.
func (o *object) outlast(closing func() bool) error {
	for {
		o.done()
		// Close takes o once every holder has let go: a use from now
		// waits for it, unless this one came first.
		runtime.Gosched()
		if err := o.use(); err != nil {
			return err
		}
		if !closing() {
			return nil
		}
	}
}

// isClosed reports whether Close has completed.
func (o *object) isClosed() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.closed
}

// close runs destroy once, with o write-locked, if no child depends on o.
// interrupt, if not nil, runs first (outside the lock) to wake operations
// that hold o for a long time (a Wait parked on the netpoller); it runs only
// when o has no children, and undo reverts it if Close fails after all. If
// destroy fails, o stays open and Close can be retried.
func (o *object) close(destroy func() error, interrupt, undo func()) error {
	if o.isClosed() {
		return nil
	}
	if err := o.busy(); err != nil {
		return err
	}
	if interrupt != nil {
		interrupt()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	err := o.busy()
	if err == nil {
		err = destroy()
	}
	if err != nil {
		if undo != nil {
			undo()
		}
		return err
	}
	o.closed = true
	for _, p := range o.parent {
		p.childMu.Lock()
		p.children = slices.DeleteFunc(p.children, func(c *object) bool { return c == o })
		p.childMu.Unlock()
	}
	return nil
}

// closeTearing is close for an object whose teardown cannot be undone once
// it has begun (a Conn: its rdma_cm id is destroyed first). check runs
// with o write-locked and, failing, closes nothing; otherwise teardown
// runs and o is closed whatever it returns, so that no method reaches
// what it freed, and its error (what could not be released) is returned,
// once. check also runs before interrupt: o's own children are not what
// keeps it open (a Conn's are on what it owns), and a Close that ends in a
// *BusyError must not have ended the waits on o with ErrClosed first.
func (o *object) closeTearing(check, teardown func() error, interrupt, undo func()) error {
	if o.isClosed() {
		return nil
	}
	if err := check(); err != nil {
		return err
	}
	var left error
	err := o.close(func() error {
		if err := check(); err != nil {
			return err
		}
		left = teardown()
		return nil
	}, interrupt, undo)
	if err != nil {
		return err
	}
	return left
}
