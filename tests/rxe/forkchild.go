package rxe

/*
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

// A plain fork(2) (no CLONE_VM): the child gets a copy of the whole address
// space, the registered buffers included, which is what a C library's fork
// or a cgo program's does, and what os/exec never does. The child runs C
// alone and only async-signal-safe calls: it closes its copy of the pipe's
// write end, waits for one byte on rfd (EOF, from the parent closing its
// end, ends it too, with status 2), writes 0xa5 over n bytes at a and at b
// in its own copy of the address space, and exits 0. All signals stay
// blocked in the child: it runs none of Go's handlers.
static int goverbs_fork_scribbler(int rfd, int wfd, uintptr_t a, uintptr_t b, size_t n) {
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		ssize_t r;
		close(wfd);
		do {
			r = read(rfd, &c, 1);
		} while (r < 0 && errno == EINTR);
		if (r != 1) {
			_exit(2);
		}
		memset((void *)a, 0xa5, n);
		memset((void *)b, 0xa5, n);
		_exit(0);
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return pid;
}
*/
import "C"

import "syscall"

// forkScribbler forks a child with a copy of the address space (see the C
// above): once a byte arrives on rfd it writes 0xa5 over its copies of the
// n bytes at a and at b, then exits 0. It returns the child's pid.
func forkScribbler(rfd, wfd int, a, b uintptr, n int) (int, error) {
	pid, err := C.goverbs_fork_scribbler(C.int(rfd), C.int(wfd), C.uintptr_t(a), C.uintptr_t(b), C.size_t(n))
	if pid < 0 {
		if err == nil {
			err = syscall.EINVAL
		}
		return -1, err
	}
	return int(pid), nil
}
