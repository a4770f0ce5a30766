package perf

import "fmt"

// sendPlan is the bandwidth client's posting arithmetic (bwClient, and
// perf_cloop_next and perf_cloop_signaled in cloop.h for the C loop): Iters
// WRs, PostList to an ibv_post_send, one in CQMod signaled and the last,
// at most TxDepth outstanding. The client learns that WRs completed only
// from signaled ones, so an outstanding run of unsignaled WRs holds its
// place in the send queue until a later signaled one completes: check
// refuses the plans where that run leaves no room for the next post list.
type sendPlan struct {
	Iters, PostList, CQMod, TxDepth int
}

func (c Config) sendPlan() sendPlan {
	return sendPlan{Iters: c.Iters, PostList: c.PostList, CQMod: c.CQMod, TxDepth: c.TxDepth}
}

// next returns how many WRs the client posts in its next ibv_post_send,
// having posted posted and learnt that done completed; 0 when it must
// poll first, or has posted them all.
func (p sendPlan) next(posted, done int) int {
	if posted >= p.Iters || posted-done+p.PostList > p.TxDepth {
		return 0
	}
	return min(p.PostList, p.Iters-posted)
}

// signaled reports whether WR seq (from 0) asks for a completion.
func (p sendPlan) signaled(seq int) bool {
	return (seq+1)%p.CQMod == 0 || seq+1 == p.Iters
}

// check returns why the client could not finish the plan, or nil. The
// rules are perftest's (force_dependecies), with one allowance: a CQ
// moderation that is a multiple of the post list, which perftest refuses
// and tests/rxe runs (-l 4 -Q 8). They are enough: with one WR a post,
// CQMod at most TxDepth (ParseArgs caps it there, as perftest does) puts a
// signaled WR within every TxDepth outstanding; with more, every signaled
// WR either ends a post list or ends a run of whole post lists that fits
// in the send queue, so nothing outstanding is left unaccounted for once
// it completes. perftest lets a post list overflow the send queue, and
// ibv_post_send fail; this refuses it.
func (p sendPlan) check() error {
	switch {
	case p.PostList > p.TxDepth:
		return fmt.Errorf("-l %d is above -tx-depth %d: a post list must fit in the send queue", p.PostList, p.TxDepth)
	case p.PostList > 1 && p.Iters%p.PostList != 0:
		return fmt.Errorf("-n %d is not a multiple of -l %d (perftest: Number of iterations must be a multiple of post list size)", p.Iters, p.PostList)
	case p.PostList > 1 && p.PostList%p.CQMod != 0 && p.CQMod%p.PostList != 0:
		return fmt.Errorf("-l %d and -Q %d (-Q at most -tx-depth): one must be a multiple of the other, "+
			"or the client can wait for a completion that never comes (perftest: Post list size must be a multiple of CQ moderation)", p.PostList, p.CQMod)
	}
	return nil
}
