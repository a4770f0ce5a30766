package rxe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// What revokes a remote key, and what does not, checked with the peer's
// RDMA writes and reads under an old key: each must complete with
// IBV_WC_REM_ACCESS_ERR and leave the server's memory as it was, byte for
// byte. The memory is the test's own mapping, registered with
// PD.Register, so that it outlives every MR over it and can be compared
// after the MR is gone.

// skPeer is a client connection and a 4 KiB MR on its own PD, filled with
// a pattern the server's memory never holds, so that a write that got
// through would show.
type skPeer struct {
	c  *hand.Conn
	mr *hand.MR
}

// skTally counts what the tests tried and saw, for the figures they log.
type skTally struct {
	attempts, refusals, compared int
}

// skMem maps n bytes of anonymous memory, outside the Go heap, unmapped
// when the test ends, filled with a pattern of its own.
func skMem(t *testing.T, n int) []byte {
	t.Helper()
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, syscall.Munmap(mem)) })
	for i := range mem {
		mem[i] = byte(i*7 + 3)
	}
	return mem
}

// skConnect connects a new client, with its own PD and CQ, to l, whose
// next request is accepted with srvCfg; both are closed when the test
// ends (the client's MR first).
func skConnect(t *testing.T, l *hand.Listener, srvCfg hand.ConnConfig) (skPeer, *hand.Conn) {
	t.Helper()
	srvc := ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig { return srvCfg })
	cli, err := hand.Dial(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
	require.NoError(t, err)
	ctlCloseLater(t, cli)
	srv := <-srvc
	require.NotNil(t, srv)
	ctlCloseLater(t, srv)
	mr, err := cli.PD().Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlCloseLater(t, mr)
	for i := range mr.Bytes() {
		mr.Bytes()[i] = 0xa5
	}
	return skPeer{c: cli, mr: mr}, srv
}

// try has p RDMA-write (or read) len(remote) bytes to (from) remote and
// returns the completion's status.
func (k *skTally) try(t *testing.T, p skPeer, write bool, remote hand.RemoteBuffer) verbs.WCStatus {
	t.Helper()
	c, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	if write {
		c.Reserve(1).SetWriteTo(0, 0x5ca1e, hand.Signaled, p.mr.SGE(0, remote.Len()), remote)
	} else {
		c.Reserve(1).SetReadFrom(0, 0x5ca1e, hand.Signaled, p.mr.SGE(0, remote.Len()), remote)
	}
	require.NoError(t, c.PostSend(p.c.QP()))
	k.attempts++
	return ctlReap(t, p.c.SendCQ(), 1)[0].Status
}

// granted has p write payload into remote and read it back, both of which
// must succeed, and checks it landed in mem at off; want is updated to
// match.
func (k *skTally) granted(t *testing.T, p skPeer, remote hand.RemoteBuffer, mem []byte, off int, want []byte, payload string) {
	t.Helper()
	dst, err := remote.Slice(0, len(payload))
	require.NoError(t, err)
	copy(p.mr.Bytes(), payload)
	st := k.try(t, p, true, dst)
	require.Equal(t, verbs.WCSuccess, st, "write under %s: %s", remote, hand.StatusError(st))
	require.Equal(t, payload, string(mem[off:off+len(payload)]))
	copy(want[off:], payload)
	clear(p.mr.Bytes()[:len(payload)])
	st = k.try(t, p, false, dst)
	require.Equal(t, verbs.WCSuccess, st, "read under %s: %s", remote, hand.StatusError(st))
	require.Equal(t, payload, string(p.mr.Bytes()[:len(payload)]))
	for i := range len(payload) {
		p.mr.Bytes()[i] = 0xa5
	}
	k.same(t, mem, want, "after the granted write")
}

// refused has p write to (or read from) remote, which must complete with a
// remote access error and leave mem equal to want.
func (k *skTally) refused(t *testing.T, p skPeer, write bool, remote hand.RemoteBuffer, mem, want []byte, what string) {
	t.Helper()
	st := k.try(t, p, write, remote)
	require.Equal(t, verbs.WCRemAccessErr, st, "%s: %s", what, hand.StatusError(st))
	require.ErrorIs(t, hand.StatusError(st), hand.StatusError(hand.StatusRemAccessErr))
	k.refusals++
	k.same(t, mem, want, what)
}

// same requires mem to equal want, naming the first byte that differs.
func (k *skTally) same(t *testing.T, mem, want []byte, what string) {
	t.Helper()
	if i := skDiff(mem, want); i >= 0 {
		t.Fatalf("%s: the server's memory changed at byte %d: %#x, was %#x", what, i, mem[i], want[i])
	}
	k.compared += len(mem)
}

func skDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func (k *skTally) log(t *testing.T) {
	t.Logf("%d RDMA operations, %d refused with IBV_WC_REM_ACCESS_ERR as required, %d bytes of server memory compared",
		k.attempts, k.refusals, k.compared)
}

// An MR's rkey on a PD the server shares among its connections: ending
// the connection it was advertised on does not revoke it (a new
// connection on the same PD uses it), deregistering the MR does, on a
// connection that is still up and on a new one, even after the same
// memory is registered again, under a new key. Writes and reads with the
// old key are refused and change nothing.
func TestStaleKeyMRDeregistered(t *testing.T) {
	_, spd, _, _ := cmShared(t)
	l := ctlListen(t)
	mem := skMem(t, 8192)
	want := bytes.Clone(mem)
	smr, err := spd.Register(mem, hand.AccessLocalWrite|hand.AccessRemoteWrite|hand.AccessRemoteRead)
	require.NoError(t, err)
	ctlCloseLater(t, smr)
	var k skTally
	defer k.log(t)

	// Advertised to connection 1 as a peer would get it, in the wire format.
	adv, err := smr.Remote().Slice(1024, 2048)
	require.NoError(t, err)
	b, err := adv.MarshalBinary()
	require.NoError(t, err)
	var remote hand.RemoteBuffer
	require.NoError(t, remote.UnmarshalBinary(b))

	p1, s1 := skConnect(t, l, hand.ConnConfig{PD: spd})
	k.granted(t, p1, remote, mem, 1024, want, "connection 1, granted")
	require.NoError(t, p1.mr.Close())
	require.NoError(t, p1.c.Close())
	require.NoError(t, s1.Close())

	// The rkey outlives the connection it was advertised on: the MR is
	// still registered in the PD the next connection shares.
	p2, _ := skConnect(t, l, hand.ConnConfig{PD: spd})
	k.granted(t, p2, remote, mem, 1024, want, "connection 2, after connection 1 ended")
	t.Logf("after connection 1 closed, connection 2 on the same PD still wrote and read under rkey %#x: closing a connection does not revoke an MR of a shared PD", remote.RKey())

	oldKey := smr.RKey()
	require.NoError(t, smr.Close())
	k.refused(t, p2, true, remote, mem, want, "write on connection 2, still up, after the MR was deregistered")

	p3, _ := skConnect(t, l, hand.ConnConfig{PD: spd})
	k.refused(t, p3, false, remote, mem, want, "read on connection 3, new, after the MR was deregistered")

	// The same bytes registered again: the new MR has a key of its own and
	// the old one still opens nothing.
	smr2, err := spd.Register(mem, hand.AccessLocalWrite|hand.AccessRemoteWrite|hand.AccessRemoteRead)
	require.NoError(t, err)
	ctlCloseLater(t, smr2)
	require.NotEqual(t, oldKey, smr2.RKey(), "the memory registered again got the old key")
	p4, _ := skConnect(t, l, hand.ConnConfig{PD: spd})
	k.refused(t, p4, true, remote, mem, want, "write on connection 4 after the memory was registered again")
	p5, _ := skConnect(t, l, hand.ConnConfig{PD: spd})
	fresh, err := smr2.Remote().Slice(1024, 2048)
	require.NoError(t, err)
	k.granted(t, p5, fresh, mem, 1024, want, "connection 5, under the new key")
	require.Equal(t, 3, k.refusals)
}

// staleKeyChildEnv makes this test binary run skChild instead of the tests:
// TestStaleKeyPeerDeath's client, a process the test kills.
const staleKeyChildEnv = "GOVERBS_TEST_STALEKEY_CLIENT"

// skChild dials the server at args[0], reads the buffer it may write from
// stdin (a marshalled RemoteBuffer, in hex, one line), writes "from the
// client that dies" into it, prints the completion's status and then waits
// to be killed.
func skChild(args []string) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "stale-key client: %s: %v\n", what, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := hand.Dial(ctx, args[0], hand.ConnConfig{})
	if err != nil {
		return fail("Dial", err)
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fail("reading the buffer", err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil {
		return fail("decoding the buffer", err)
	}
	var remote hand.RemoteBuffer
	if err := remote.UnmarshalBinary(b); err != nil {
		return fail("decoding the buffer", err)
	}
	mr, err := c.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		return fail("Alloc", err)
	}
	const msg = "from the client that dies"
	copy(mr.Bytes(), msg)
	chain, err := hand.NewSendChain(1, 1, 0)
	if err != nil {
		return fail("NewSendChain", err)
	}
	chain.Reserve(1).SetWriteTo(0, 1, hand.Signaled, mr.SGE(0, len(msg)), remote)
	if err := chain.PostSend(c.QP()); err != nil {
		return fail("PostSend", err)
	}
	wc := make([]verbs.WC, 1)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := c.SendCQ().Poll(wc)
		if err != nil {
			return fail("Poll", err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			return fail("the write's completion", context.DeadlineExceeded)
		}
		time.Sleep(100 * time.Microsecond)
	}
	fmt.Printf("write %d\n", wc[0].Status)
	time.Sleep(time.Hour) // until killed, its connection up
	return 0
}

// A client process killed while connected: the server, which registered
// its memory on its Conn's own PD and advertised it to that client, cannot
// close the Conn while the MR lives (BusyError), closes the MR and the
// Conn, and then a new client with the dead one's rkey is refused, for a
// write and for a read, and the memory is unchanged.
func TestStaleKeyPeerDeath(t *testing.T) {
	l := ctlListen(t)
	self, err := os.Executable()
	require.NoError(t, err)
	mem := skMem(t, 8192)
	want := bytes.Clone(mem)
	var k skTally
	defer k.log(t)

	srvc := ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig { return hand.ConnConfig{} })
	cmd := exec.Command(self, l.Addr().String())
	cmd.Env = append(os.Environ(), staleKeyChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	srv := <-srvc
	require.NotNil(t, srv)
	ctlCloseLater(t, srv)
	smr, err := srv.PD().Register(mem, hand.AccessLocalWrite|hand.AccessRemoteWrite|hand.AccessRemoteRead)
	require.NoError(t, err)
	ctlCloseLater(t, smr)
	remote, err := smr.Remote().Slice(4096, 64)
	require.NoError(t, err)
	b, err := remote.MarshalBinary()
	require.NoError(t, err)
	_, err = io.WriteString(stdin, hex.EncodeToString(b)+"\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the client's report")
	require.Equal(t, fmt.Sprintf("write %d\n", verbs.WCSuccess), line, "the client's write")
	k.attempts++
	const msg = "from the client that dies"
	require.Equal(t, msg, string(mem[4096:4096+len(msg)]))
	copy(want[4096:], msg)

	killed := time.Now()
	require.NoError(t, cmd.Process.Kill())
	require.Error(t, cmd.Wait(), "killed")
	exited = true
	require.NoError(t, srv.WaitDisconnect(ctlContext(t, 20*time.Second)), "the server's side of the dead client's connection")
	t.Logf("the server saw its client's death as a disconnect %v after the kill", time.Since(killed).Round(time.Millisecond))

	var busy *hand.BusyError
	require.ErrorAs(t, srv.Close(), &busy, "Close with the MR alive on the Conn's own PD")
	require.Contains(t, busy.Error(), "MR lkey")
	require.NoError(t, smr.Close())
	require.NoError(t, srv.Close())
	k.same(t, mem, want, "after the Conn closed")

	p2, _ := skConnect(t, l, hand.ConnConfig{})
	k.refused(t, p2, true, remote, mem, want, "write by a new client under the dead client's rkey")
	p3, _ := skConnect(t, l, hand.ConnConfig{})
	k.refused(t, p3, false, remote, mem, want, "read by a new client under the dead client's rkey")
}

// A type 2 window is a grant to one QP for as long as the binder wants:
// bound on connection A, it lets A's peer write and read its part of the
// MR; the same rkey on connection B, on the same PD, is refused; a local
// invalidate on A ends it for A's peer too. Bound again on connection D,
// the peer gives it back with a send with invalidate, after which its key
// is refused on D. The MR itself has no remote access: its own rkey is
// refused. Memory is unchanged by every refused operation.
func TestStaleKeyMWType2(t *testing.T) {
	_, spd, _, _ := cmShared(t)
	l := ctlListen(t)
	mem := skMem(t, 8192)
	want := bytes.Clone(mem)
	smr, err := spd.Register(mem, hand.AccessLocalWrite|hand.AccessMWBind)
	require.NoError(t, err)
	ctlCloseLater(t, smr)
	mw, err := spd.NewMW(hand.MWType2)
	if requireNotSupportedBefore(t, err, "ibv_alloc_mw") {
		return
	}
	ctlCloseLater(t, mw)
	var k skTally
	defer k.log(t)
	chain, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer chain.Close()

	// bind binds the window to 1024 bytes at 4096 through srv's QP and
	// returns what its peer is told.
	bind := func(srv *hand.Conn) hand.RemoteBuffer {
		t.Helper()
		before := mw.RKey()
		rkey := chain.Reserve(1).SetBindMW(0, 0xb1, hand.Signaled, mw, smr, 4096, 1024, hand.AccessRemoteWrite|hand.AccessRemoteRead)
		require.NotEqual(t, before, rkey, "each bind makes a new rkey")
		require.Equal(t, before&^0xff, rkey&^0xff, "the device's index part is kept")
		require.Equal(t, rkey, mw.RKey())
		require.NoError(t, chain.PostSend(srv.QP()))
		wc := ctlReap(t, srv.SendCQ(), 1)[0]
		require.Equal(t, verbs.WCSuccess, wc.Status, "bind: %s", hand.StatusError(wc.Status))
		require.Equal(t, hand.OpcodeBindMW, wc.Opcode)
		remote, err := hand.NewRemoteBuffer(smr.Addr()+4096, 1024, rkey)
		require.NoError(t, err)
		return remote
	}

	peerA, srvA := skConnect(t, l, hand.ConnConfig{PD: spd})
	peerB, _ := skConnect(t, l, hand.ConnConfig{PD: spd})
	peerC, _ := skConnect(t, l, hand.ConnConfig{PD: spd})
	remote := bind(srvA)
	k.granted(t, peerA, remote, mem, 4096, want, "through the window, on the QP it is bound to")
	k.refused(t, peerB, true, remote, mem, want, "write under the window's rkey on another QP of the same PD")
	whole := smr.Remote()
	mrPart, err := whole.Slice(4096, 64)
	require.NoError(t, err)
	k.refused(t, peerC, false, mrPart, mem, want, "read under the MR's own rkey, which has no remote access")

	chain.Reserve(1).SetLocalInv(0, 0x1e, hand.Signaled, remote.RKey())
	require.NoError(t, chain.PostSend(srvA.QP()))
	wc := ctlReap(t, srvA.SendCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status, "local invalidate: %s", hand.StatusError(wc.Status))
	require.Equal(t, hand.OpcodeLocalInv, wc.Opcode)
	k.refused(t, peerA, true, remote, mem, want, "write on the bound QP after the local invalidate")

	// Bound again, to connection D; its peer sends the key back with a
	// send with invalidate, which the server's receive reports.
	peerD, srvD := skConnect(t, l, hand.ConnConfig{PD: spd})
	recvMR, err := srvD.PD().Alloc(64, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlCloseLater(t, recvMR)
	recv, err := hand.NewRecvChain(1, 1)
	require.NoError(t, err)
	defer recv.Close()
	recv.Reserve(1).Set(0, 0x2e, recvMR.SGE(0, 64))
	require.NoError(t, recv.PostRecv(srvD.QP()))
	again := bind(srvD)
	require.NotEqual(t, remote.RKey(), again.RKey())
	k.granted(t, peerD, again, mem, 4096, want, "through the window bound again, on connection D")
	copy(peerD.mr.Bytes(), "done with it")
	chain.Reserve(1).SetSendInv(0, 0x3e, hand.Signaled, peerD.mr.SGE(0, 12), again.RKey())
	require.NoError(t, chain.PostSend(peerD.c.QP()))
	wc = ctlReap(t, peerD.c.SendCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status, "send with invalidate: %s", hand.StatusError(wc.Status))
	wc = ctlReap(t, srvD.RecvCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status, "the server's receive: %s", hand.StatusError(wc.Status))
	require.Equal(t, "done with it", string(recvMR.Bytes()[:12]))
	require.Equal(t, again.RKey(), *wc.InvalidatedRKey(), "the receive's invalidated_rkey")
	// rxe (Linux 6.1, the VM's) flags the receive with the kernel's
	// IB_WC_WITH_INVALIDATE (4, which user space reads as
	// IBV_WC_IP_CSUM_OK), not IBV_WC_WITH_INV (8), so hand's
	// WC.InvalidatedRKey reports no key there; required as it is, so that
	// a kernel that flags it right is noticed (and this said otherwise).
	t.Logf("send with invalidate: the receive's wc_flags %#x, invalidated_rkey %#x", wc.WCFlags, *wc.InvalidatedRKey())
	require.Zero(t, wc.WCFlags&verbs.WCWithInv, "rxe now flags IBV_WC_WITH_INV: require it here and in the comment")
	require.NotZero(t, wc.WCFlags&4, "rxe's kernel IB_WC_WITH_INVALIDATE")
	k.refused(t, peerD, false, again, mem, want, "read on the bound QP after the peer's send with invalidate")
	require.Equal(t, 4, k.refusals)
}
