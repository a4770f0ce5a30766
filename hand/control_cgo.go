package hand

// The control path's own cgo calls. The generated stubs return only the C
// return value, which is enough for verbs that return their errno
// (ibv_modify_qp, ibv_query_port, the destroy verbs): those are called
// through package verbs. The verbs below return NULL or -1 and leave the
// reason in errno, which only a call that captures it on the same thread
// (cgo's two-result form) can read; they are called from here.

/*
#include <stdlib.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// ibv_reg_mr is a macro (it picks the access-flag check at compile time).
static struct ibv_mr *goverbs_reg_mr(struct ibv_pd *pd, void *addr, size_t length, unsigned int access) {
	return ibv_reg_mr(pd, addr, length, access);
}
*/
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// nullErr is the error of a verb that returned NULL, from the errno it set.
func nullErr(op string, err error) error {
	errno, _ := err.(syscall.Errno)
	if errno == 0 {
		errno = syscall.EIO // the verb failed without saying why
	}
	return verbErr(op, errno)
}

// minusOneErr is the error of a verb that returns -1 (or a negative errno)
// and sets errno.
func minusOneErr(op string, r C.int, err error) error {
	if r >= 0 {
		return nil
	}
	errno, _ := err.(syscall.Errno)
	if errno == 0 && r != -1 {
		errno = syscall.Errno(-r)
	}
	return nullErr(op, errno)
}

func ibvGetDeviceList() ([]*verbs.Device, func(), error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, nil, nullErr("ibv_get_device_list", err)
	}
	devs := unsafe.Slice((**verbs.Device)(unsafe.Pointer(list)), int(n))
	return devs, func() { C.ibv_free_device_list(list) }, nil
}

func ibvOpenDevice(d *verbs.Device) (*verbs.Context, error) {
	c, err := C.ibv_open_device((*C.struct_ibv_device)(unsafe.Pointer(d)))
	if c == nil {
		return nil, nullErr("ibv_open_device", err)
	}
	return (*verbs.Context)(unsafe.Pointer(c)), nil
}

func ibvAllocPD(c *verbs.Context) (*verbs.PD, error) {
	pd, err := C.ibv_alloc_pd((*C.struct_ibv_context)(unsafe.Pointer(c)))
	if pd == nil {
		return nil, nullErr("ibv_alloc_pd", err)
	}
	return (*verbs.PD)(unsafe.Pointer(pd)), nil
}

func ibvRegMR(pd *verbs.PD, addr unsafe.Pointer, length int, access uint32) (*verbs.MR, syscall.Errno) {
	mr, err := C.goverbs_reg_mr((*C.struct_ibv_pd)(unsafe.Pointer(pd)), addr, C.size_t(length), C.uint(access))
	if mr == nil {
		errno, _ := err.(syscall.Errno)
		if errno == 0 {
			errno = syscall.EIO
		}
		return nil, errno
	}
	return (*verbs.MR)(unsafe.Pointer(mr)), 0
}

func ibvRegDmabufMR(pd *verbs.PD, offset, length, iova uint64, fd int, access uint32) (*verbs.MR, error) {
	mr, err := C.ibv_reg_dmabuf_mr((*C.struct_ibv_pd)(unsafe.Pointer(pd)), C.uint64_t(offset), C.size_t(length),
		C.uint64_t(iova), C.int(fd), C.int(access))
	if mr == nil {
		return nil, nullErr("ibv_reg_dmabuf_mr", err)
	}
	return (*verbs.MR)(unsafe.Pointer(mr)), nil
}

func ibvCreateCompChannel(c *verbs.Context) (*verbs.CompChannel, error) {
	ch, err := C.ibv_create_comp_channel((*C.struct_ibv_context)(unsafe.Pointer(c)))
	if ch == nil {
		return nil, nullErr("ibv_create_comp_channel", err)
	}
	return (*verbs.CompChannel)(unsafe.Pointer(ch)), nil
}

func ibvCreateCQ(c *verbs.Context, cqe int, ch *verbs.CompChannel, vector int) (*verbs.CQ, error) {
	cq, err := C.ibv_create_cq((*C.struct_ibv_context)(unsafe.Pointer(c)), C.int(cqe), nil,
		(*C.struct_ibv_comp_channel)(unsafe.Pointer(ch)), C.int(vector))
	if cq == nil {
		return nil, nullErr("ibv_create_cq", err)
	}
	return (*verbs.CQ)(unsafe.Pointer(cq)), nil
}

func ibvCreateCQEx(c *verbs.Context, attr *verbs.CQInitAttrEx) (*verbs.CQEx, error) {
	cq, err := C.ibv_create_cq_ex((*C.struct_ibv_context)(unsafe.Pointer(c)), (*C.struct_ibv_cq_init_attr_ex)(unsafe.Pointer(attr)))
	if cq == nil {
		return nil, nullErr("ibv_create_cq_ex", err)
	}
	return (*verbs.CQEx)(unsafe.Pointer(cq)), nil
}

// ibvGetCQEvent reads one event from a non-blocking channel: EAGAIN means
// none is pending.
func ibvGetCQEvent(ch *verbs.CompChannel) (*verbs.CQ, syscall.Errno) {
	var cq *C.struct_ibv_cq
	var ctx unsafe.Pointer
	r, err := C.ibv_get_cq_event((*C.struct_ibv_comp_channel)(unsafe.Pointer(ch)), &cq, &ctx)
	if r != 0 {
		errno, _ := err.(syscall.Errno)
		if errno == 0 {
			errno = syscall.EIO
		}
		return nil, errno
	}
	return (*verbs.CQ)(unsafe.Pointer(cq)), 0
}

func ibvCreateQP(pd *verbs.PD, attr *verbs.QPInitAttr) (*verbs.QP, error) {
	qp, err := C.ibv_create_qp((*C.struct_ibv_pd)(unsafe.Pointer(pd)), (*C.struct_ibv_qp_init_attr)(unsafe.Pointer(attr)))
	if qp == nil {
		return nil, nullErr("ibv_create_qp", err)
	}
	return (*verbs.QP)(unsafe.Pointer(qp)), nil
}

func ibvCreateSRQ(pd *verbs.PD, attr *verbs.SRQInitAttr) (*verbs.SRQ, error) {
	srq, err := C.ibv_create_srq((*C.struct_ibv_pd)(unsafe.Pointer(pd)), (*C.struct_ibv_srq_init_attr)(unsafe.Pointer(attr)))
	if srq == nil {
		return nil, nullErr("ibv_create_srq", err)
	}
	return (*verbs.SRQ)(unsafe.Pointer(srq)), nil
}

func ibvCreateAH(pd *verbs.PD, attr *verbs.AHAttr) (*verbs.AH, error) {
	ah, err := C.ibv_create_ah((*C.struct_ibv_pd)(unsafe.Pointer(pd)), (*C.struct_ibv_ah_attr)(unsafe.Pointer(attr)))
	if ah == nil {
		return nil, nullErr("ibv_create_ah", err)
	}
	return (*verbs.AH)(unsafe.Pointer(ah)), nil
}

func ibvAllocMW(pd *verbs.PD, typ verbs.MWType) (*verbs.MW, error) {
	mw, err := C.ibv_alloc_mw((*C.struct_ibv_pd)(unsafe.Pointer(pd)), C.enum_ibv_mw_type(typ))
	if mw == nil {
		return nil, nullErr("ibv_alloc_mw", err)
	}
	return (*verbs.MW)(unsafe.Pointer(mw)), nil
}

// ibvGetAsyncEvent reads one async event from a non-blocking async fd:
// EAGAIN means none is pending.
func ibvGetAsyncEvent(c *verbs.Context, ev *verbs.AsyncEvent) syscall.Errno {
	r, err := C.ibv_get_async_event((*C.struct_ibv_context)(unsafe.Pointer(c)), (*C.struct_ibv_async_event)(unsafe.Pointer(ev)))
	if r != 0 {
		errno, _ := err.(syscall.Errno)
		if errno == 0 {
			errno = syscall.EIO
		}
		return errno
	}
	return 0
}

// librdmacm: every call returns -1 and sets errno.

func rdmaGetDevices() ([]*verbs.Context, error) {
	if err := rdmacm.Load(); err != nil {
		return nil, err
	}
	var n C.int
	list, err := C.rdma_get_devices(&n)
	if list == nil {
		return nil, nullErr("rdma_get_devices", err)
	}
	defer C.rdma_free_devices(list)
	return append([]*verbs.Context(nil), unsafe.Slice((**verbs.Context)(unsafe.Pointer(list)), int(n))...), nil
}

func rdmaCreateEventChannel() (*rdmacm.EventChannel, error) {
	if err := rdmacm.Load(); err != nil {
		return nil, err
	}
	ch, err := C.rdma_create_event_channel()
	if ch == nil {
		return nil, nullErr("rdma_create_event_channel", err)
	}
	return (*rdmacm.EventChannel)(unsafe.Pointer(ch)), nil
}

func cmID(id *rdmacm.CMID) *C.struct_rdma_cm_id { return (*C.struct_rdma_cm_id)(unsafe.Pointer(id)) }

func rdmaCreateID(ch *rdmacm.EventChannel, ps rdmacm.PortSpace) (*rdmacm.CMID, error) {
	var id *C.struct_rdma_cm_id
	r, err := C.rdma_create_id((*C.struct_rdma_event_channel)(unsafe.Pointer(ch)), &id, nil, C.enum_rdma_port_space(ps))
	if e := minusOneErr("rdma_create_id", r, err); e != nil {
		return nil, e
	}
	return (*rdmacm.CMID)(unsafe.Pointer(id)), nil
}

func rdmaDestroyID(id *rdmacm.CMID) error {
	r, err := C.rdma_destroy_id(cmID(id))
	return minusOneErr("rdma_destroy_id", r, err)
}

func rdmaBindAddr(id *rdmacm.CMID, sa *sockaddrBuf) error {
	r, err := C.rdma_bind_addr(cmID(id), (*C.struct_sockaddr)(unsafe.Pointer(sa)))
	return minusOneErr("rdma_bind_addr", r, err)
}

func rdmaListen(id *rdmacm.CMID, backlog int) error {
	r, err := C.rdma_listen(cmID(id), C.int(backlog))
	return minusOneErr("rdma_listen", r, err)
}

func rdmaResolveAddr(id *rdmacm.CMID, src, dst *sockaddrBuf, timeoutMs int) error {
	var s *C.struct_sockaddr
	if src != nil {
		s = (*C.struct_sockaddr)(unsafe.Pointer(src))
	}
	r, err := C.rdma_resolve_addr(cmID(id), s, (*C.struct_sockaddr)(unsafe.Pointer(dst)), C.int(timeoutMs))
	return minusOneErr("rdma_resolve_addr", r, err)
}

func rdmaResolveRoute(id *rdmacm.CMID, timeoutMs int) error {
	r, err := C.rdma_resolve_route(cmID(id), C.int(timeoutMs))
	return minusOneErr("rdma_resolve_route", r, err)
}

func rdmaCreateQP(id *rdmacm.CMID, pd *verbs.PD, attr *verbs.QPInitAttr) error {
	r, err := C.rdma_create_qp(cmID(id), (*C.struct_ibv_pd)(unsafe.Pointer(pd)), (*C.struct_ibv_qp_init_attr)(unsafe.Pointer(attr)))
	return minusOneErr("rdma_create_qp", r, err)
}

func rdmaDestroyQP(id *rdmacm.CMID) { C.rdma_destroy_qp(cmID(id)) }

// The conn param's private data is copied by librdmacm before the call
// returns, so it may point at Go memory for the duration of the call.

func rdmaConnect(id *rdmacm.CMID, p *rdmacm.ConnParam) error {
	r, err := C.rdma_connect(cmID(id), (*C.struct_rdma_conn_param)(unsafe.Pointer(p)))
	return minusOneErr("rdma_connect", r, err)
}

func rdmaAccept(id *rdmacm.CMID, p *rdmacm.ConnParam) error {
	r, err := C.rdma_accept(cmID(id), (*C.struct_rdma_conn_param)(unsafe.Pointer(p)))
	return minusOneErr("rdma_accept", r, err)
}

func rdmaReject(id *rdmacm.CMID, data []byte) error {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	r, err := C.rdma_reject(cmID(id), p, C.uint8_t(len(data)))
	return minusOneErr("rdma_reject", r, err)
}

func rdmaSetAckTimeout(id *rdmacm.CMID, timeout uint8) error {
	v := C.uint8_t(timeout)
	r, err := C.rdma_set_option(cmID(id), C.RDMA_OPTION_ID, C.RDMA_OPTION_ID_ACK_TIMEOUT, unsafe.Pointer(&v), C.size_t(unsafe.Sizeof(v)))
	return minusOneErr("rdma_set_option(ACK_TIMEOUT)", r, err)
}

func rdmaDisconnect(id *rdmacm.CMID) error {
	r, err := C.rdma_disconnect(cmID(id))
	return minusOneErr("rdma_disconnect", r, err)
}

func rdmaMigrateID(id *rdmacm.CMID, ch *rdmacm.EventChannel) error {
	r, err := C.rdma_migrate_id(cmID(id), (*C.struct_rdma_event_channel)(unsafe.Pointer(ch)))
	return minusOneErr("rdma_migrate_id", r, err)
}

// rdmaGetCMEvent reads one event from a non-blocking event channel: EAGAIN
// means none is pending.
func rdmaGetCMEvent(ch *rdmacm.EventChannel) (*rdmacm.CMEvent, syscall.Errno) {
	var ev *C.struct_rdma_cm_event
	r, err := C.rdma_get_cm_event((*C.struct_rdma_event_channel)(unsafe.Pointer(ch)), &ev)
	if r != 0 {
		errno, _ := err.(syscall.Errno)
		if errno == 0 {
			errno = syscall.EIO
		}
		return nil, errno
	}
	return (*rdmacm.CMEvent)(unsafe.Pointer(ev)), 0
}
