package rsocket

// sendKind is what a posted send holds until it completes.
type sendKind uint8

const (
	sendData  sendKind = iota // a data message: a send queue entry and its bytes of the send buffer
	sendCtrl                  // a control message (advertisement, shutdown, disconnect): a control slot
	sendProbe                 // a keepalive probe: a control slot
)

type sent struct {
	kind  sendKind
	bytes uint32
}

// sendLog is the sends posted and not yet known complete, in the order
// they were posted; a send's work request id is its place in that order.
//
// Only some sends ask for a completion. An RC send queue completes its
// requests in the order they were posted, so any completion of one (the
// success of a signaled send, or the error or flush that every request,
// signaled or not, completes with once the QP fails) means that every send
// posted before it completed too, and their resources are free. A data
// send that leaves the send queue or the send buffer less than half free
// is signaled, and so is every control message, so that whatever a Write
// or a control message waits for has a completion on its way.
type sendLog struct {
	ring []sent
	head int
	n    int
	next uint32 // the id of the next send posted
}

func newSendLog(size int) sendLog { return sendLog{ring: make([]sent, size)} }

// add records a send and returns its work request id; the caller keeps
// the log within its size (sqeAvail and the control slots).
func (l *sendLog) add(s sent) uint64 {
	l.ring[(l.head+l.n)%len(l.ring)] = s
	l.n++
	id := l.next
	l.next++
	return uint64(id)
}

// through takes the completion of the send with work request id id and
// returns that send's kind and how many sends it completes: itself and
// every one before it still in the log, which the caller takes with pop.
// ok is false for an id of no send in the log.
func (l *sendLog) through(id uint64) (kind sendKind, n int, ok bool) {
	if id>>32 != 0 {
		return 0, 0, false
	}
	k := int(uint32(id) - (l.next - uint32(l.n))) // its place after the oldest
	if k < 0 || k >= l.n {
		return 0, 0, false
	}
	return l.ring[(l.head+k)%len(l.ring)].kind, k + 1, true
}

// pop removes and returns the oldest send.
func (l *sendLog) pop() sent {
	s := l.ring[l.head]
	l.head = (l.head + 1) % len(l.ring)
	l.n--
	return s
}
