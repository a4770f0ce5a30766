// Package cmem is C memory for the records and buffers that the generated
// packages (generated/verbs, generated/rdmacm) hand to C: allocated with
// calloc, so zeroed; never moved and never scanned by Go's garbage
// collector; freed explicitly, with Free or FreeSlice, once C no longer uses
// it. It lets a program written against the generated packages alone follow
// cgo's pointer rules without importing unsafe.
//
// Why records belong here. cgo checks each pointer a stub passes to C: the
// Go object it points into must hold no Go pointers. A Go struct whose
// pointer fields point at Go memory (a verbs.RecvWR whose SGList is a Go
// verbs.SGE) fails that check and panics at the call; so does a
// package-level variable of a struct type with pointer fields, even with
// every such field nil, because the runtime cannot see where such a variable
// ends. A record in C memory passes the check whatever its fields point at,
// provided they point at C memory too. The data-path stubs (verbs.PostSend,
// verbs.PostRecv, verbs.PostSRQRecv, verbs.PollCQ and rdma_cm's posts) go
// further: they skip cgo's check, as a data path must, so nothing at all
// would stop a work-request chain, its scatter lists or a completion array in
// Go memory from reaching C, where the collector neither sees nor keeps
// alive what C reads. Keep them in C memory, allocated once and reused.
//
// The contract:
//
//   - T must not be made to hold Go pointers. The collector does not scan C
//     memory: a Go pointer stored in it does not keep its object alive, and
//     cgo forbids it. A record's pointer fields may hold nil, C memory
//     (another cmem allocation) or what rdma-core returned (a *verbs.CQ).
//   - Memory registered with the device (ibv_reg_mr: verbs.RegMRSlice) must
//     come from outside the Go heap, from NewSlice or mmap: the device reads
//     and writes it long after the call that registered it, and an address
//     taken from a Go slice (Addr) keeps nothing alive. Nothing detects a Go
//     buffer registered by mistake.
//   - Every allocation is freed once, by Free or FreeSlice, and not used
//     after. Free and FreeSlice take only what New, NewSlice and CString
//     returned: handed a Go pointer, C's free corrupts the heap.
//
// calloc aligns to 16 bytes (max_align_t on amd64 and arm64): more than any
// Go type needs, and at least what every record of the generated packages
// needs in C (a test holds that).
package cmem
