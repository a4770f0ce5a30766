package hand

// The cgo calls of the rdma_create_ep path (cm_ep.go). Like control_cgo.go,
// they use cgo's two-result form to read errno on the calling thread.

/*
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// goverbs_getaddrinfo builds the hints in C: a hint's ai_src_addr is a
// pointer, which Go memory passed to C may not hold.
static int goverbs_getaddrinfo(const char *node, const char *service, int flags,
		const struct sockaddr *src, socklen_t srclen, struct rdma_addrinfo **res) {
	struct rdma_addrinfo hints;
	struct sockaddr_storage ss;
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = flags;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_RC;
	if (src != NULL) {
		memcpy(&ss, src, srclen);
		hints.ai_src_addr = (struct sockaddr *)&ss;
		hints.ai_src_len = srclen;
	}
	return rdma_getaddrinfo(node, service, &hints, res);
}
*/
import "C"

import (
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// GAIError is an rdma_getaddrinfo failure that carries a getaddrinfo(3)
// code (EAI_*) rather than an errno: librdmacm returns the code of the
// getaddrinfo it calls as is. Its message is gai_strerror's.
type GAIError struct {
	Code    int
	Message string
}

func (e *GAIError) Error() string {
	return "rdma_getaddrinfo: " + e.Message + " (EAI " + strconv.Itoa(e.Code) + ")"
}

// rdmaGetaddrinfo resolves node and service for RC over RDMA_PS_TCP, with
// src (if not nil) as the source address.
//
// rdma_getaddrinfo returns 0, or -1 with errno set (its own failures), or a
// getaddrinfo EAI_* code (the libc resolver's): EAI_SYSTEM means "see
// errno", and EAI_BADFLAGS is -1 too, told apart by errno being 0.
func rdmaGetaddrinfo(node, service string, flags int32, src *sockaddrBuf, srcAddr netip.Addr) (*rdmacm.Addrinfo, error) {
	cnode, cservice := C.CString(node), C.CString(service)
	defer C.free(unsafe.Pointer(cnode))
	defer C.free(unsafe.Pointer(cservice))
	var s *C.struct_sockaddr
	var slen C.socklen_t
	if src != nil {
		// The kernel wants the exact length of the family's sockaddr.
		s, slen = (*C.struct_sockaddr)(unsafe.Pointer(src)), C.socklen_t(unsafe.Sizeof(C.struct_sockaddr_in6{}))
		if srcAddr.Is4() {
			slen = C.socklen_t(unsafe.Sizeof(C.struct_sockaddr_in{}))
		}
	}
	var res *C.struct_rdma_addrinfo
	r, err := C.goverbs_getaddrinfo(cnode, cservice, C.int(flags), s, slen, &res)
	if r == 0 {
		if res == nil {
			return nil, &VerbError{Op: "rdma_getaddrinfo", Errno: syscall.ENODATA}
		}
		return (*rdmacm.Addrinfo)(unsafe.Pointer(res)), nil
	}
	errno, _ := err.(syscall.Errno)
	if errno != 0 && (r == -1 || r == C.EAI_SYSTEM) {
		return nil, verbErr("rdma_getaddrinfo", errno)
	}
	return nil, &GAIError{Code: int(r), Message: C.GoString(C.gai_strerror(r))}
}

func rdmaFreeaddrinfo(ai *rdmacm.Addrinfo) {
	C.rdma_freeaddrinfo((*C.struct_rdma_addrinfo)(unsafe.Pointer(ai)))
}

// rdmaCreateEP is rdma_create_ep. Active: it resolves the address and the
// route synchronously (2 s timeout each, fixed by librdmacm) and creates the
// QP. Passive: it binds and keeps pd and attr for rdma_get_request.
func rdmaCreateEP(ai *rdmacm.Addrinfo, pd *verbs.PD, attr *verbs.QPInitAttr) (*rdmacm.CMID, error) {
	var id *C.struct_rdma_cm_id
	r, err := C.rdma_create_ep(&id, (*C.struct_rdma_addrinfo)(unsafe.Pointer(ai)),
		(*C.struct_ibv_pd)(unsafe.Pointer(pd)), (*C.struct_ibv_qp_init_attr)(unsafe.Pointer(attr)))
	if e := minusOneErr("rdma_create_ep", r, err); e != nil {
		return nil, e
	}
	return (*rdmacm.CMID)(unsafe.Pointer(id)), nil
}

// rdmaDestroyEP destroys the id's QP (if any), frees what rdma_create_ep
// kept for a passive id, and destroys the id.
func rdmaDestroyEP(id *rdmacm.CMID) { C.rdma_destroy_ep(cmID(id)) }

// rdmaGetRequest is rdma_get_request on a listener whose event channel is
// non-blocking: EAGAIN means no request is pending.
func rdmaGetRequest(listen *rdmacm.CMID) (*rdmacm.CMID, syscall.Errno) {
	var id *C.struct_rdma_cm_id
	r, err := C.rdma_get_request(cmID(listen), &id)
	if r != 0 {
		errno, _ := err.(syscall.Errno)
		if errno == 0 {
			errno = syscall.EIO
		}
		return nil, errno
	}
	return (*rdmacm.CMID)(unsafe.Pointer(id)), 0
}
