package gen

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// Convention is how a C function reports failure, and so the Go signature
// of its stub.
type Convention int

const (
	// Unassigned: no rule covers the function; generation fails.
	Unassigned Convention = iota
	// CannotFail: the result is a value (a string, a rate, a field read
	// from a completion) or there is none; the stub returns it as is.
	CannotFail
	// NullErrno: a pointer, NULL on failure with errno set (ibv_create_qp).
	// The stub returns (T, error).
	NullErrno
	// ErrnoResult: an int that is 0 or the errno of the failure
	// (ibv_modify_qp, ibv_post_send); some providers return it negated,
	// which the stub accepts too. The stub returns error.
	ErrnoResult
	// MinusOneErrno: -1 with errno set (most of librdmacm,
	// ibv_get_cq_event). The stub returns error.
	MinusOneErrno
	// CountOrError: a count, or a negative value on failure with errno
	// set or the errno negated (ibv_poll_cq). The stub returns (int, error).
	CountOrError
	// GetaddrinfoCode: 0, -1 with errno set, or a getaddrinfo(3) EAI_*
	// code (rdma_getaddrinfo). The stub returns error: a *verberr.Error
	// for an errno, a *verberr.GAIError for an EAI code.
	GetaddrinfoCode
)

var conventionNames = [...]string{"unassigned", "cannot fail", "NULL and errno", "errno returned",
	"-1 and errno", "count or error", "errno or getaddrinfo code"}

func (c Convention) String() string { return conventionNames[c] }

// fits reports whether a function with result type t can follow c.
func (c Convention) fits(t *Type) bool {
	isInt := (t.Kind == KInt || t.Kind == KEnum) && t.Signed && !t.Bool
	switch c {
	case CannotFail:
		return true
	case NullErrno:
		return t.Kind == KPointer
	case ErrnoResult, MinusOneErrno, GetaddrinfoCode:
		return isInt && t.Size == 4
	case CountOrError:
		return isInt
	}
	return false
}

// ConventionRule is a named patch: it assigns Convention to the functions
// it lists, by C name, or by prefix for an entry ending in "*". The first
// rule that lists a function decides; a rule whose convention does not fit
// a function's result type fails generation, so a prefix can never sweep a
// new function into the wrong signature unnoticed.
type ConventionRule struct {
	Name       string
	Convention Convention
	Funcs      []string
	// NegativeCode: a negative result is not a -errno but a code of the
	// function's own, which the error keeps (verberr.Error.Code); the
	// stub's signature is Convention's. With CountOrError and ErrnoResult
	// it is a provider's code and no errno is read (verberr.Site.
	// ProviderCode): the error matches no errno, and an ErrnoResult's
	// positive result is still its errno. CountOrError's functions with it
	// must call no extern, whose absence (-1 and ENOSYS) would read as
	// code -1. With MinusOneErrno errno is set beside the code, and the
	// error has both (verberr.Site.CodeAndErrno); a missing function's is
	// ENOSYS with code -1. NullErrno, GetaddrinfoCode and CannotFail
	// cannot have it.
	NegativeCode bool
	// Unsupported, for a CountOrError function whose -1 sets no errno but
	// says that it has nothing to give here, is what that means
	// ("the kernel does not support device indexes"): the stub's error for
	// -1 matches EOPNOTSUPP and says it (verberr.Site.Unsupported), rather
	// than EIO or whatever errno an earlier call left. Other results below
	// 0 read as Failed reads them. Only CountOrError without NegativeCode
	// can have it.
	Unsupported string
	// Source is where a rule read from a conventions file was declared
	// ("FILE:LINE", see ParseConventions), which its errors name; "" for a
	// rule written in Go.
	Source string
}

// Conventions is the one table of how every rdma-core function reports
// failure, from the man pages and the headers' own comments. A function no
// rule lists fails generation with its file:line: each new rdma-core
// function gets a decision here. A rule entry that matches nothing in the
// headers at hand is reported, not fatal (an older or newer release may
// need it).
var Conventions = []ConventionRule{
	{
		// ibv_poll_cq(3): "a negative value" on failure, which is the
		// provider's: mlx4, mlx5, mthca, hns and vmw_pvrdma return
		// CQ_POLL_ERR (-2) for a CQE they cannot parse, others a -errno.
		// As an errno, -2 would read as ENOENT.
		Name: "poll: a count, or a provider's negative code", Convention: CountOrError, NegativeCode: true,
		Funcs: []string{"ibv_poll_cq"},
	},
	{
		// ENOENT means the CQ is empty, not a failure: the stub returns it
		// as an error all the same, and callers test errors.Is(err,
		// syscall.ENOENT); EBUSY is transient (ibv_create_cq_ex(3)). The
		// same providers' CQ_POLL_ERR (-2) comes back as is, which as
		// -ENOENT would read as an empty CQ, and after ibv_next_poll lose
		// the completion unseen.
		Name: "extended poll: 0, an errno, or a provider's negative code", Convention: ErrnoResult, NegativeCode: true,
		Funcs: []string{"ibv_start_poll", "ibv_next_poll"},
	},
	{
		Name: "values and strings", Convention: CannotFail,
		Funcs: []string{"ibv_wc_status_str", "ibv_wr_opcode_str", "ibv_node_type_str", "ibv_port_state_str",
			"ibv_event_type_str", "rdma_event_str", "ibv_rate_to_mult", "mult_to_ibv_rate", "ibv_rate_to_mbps",
			"mbps_to_ibv_rate", "ibv_inc_rkey", "ibv_flow_label_to_udp_sport", "ibv_is_qpt_supported",
			"ibv_get_device_name", "ibv_get_device_guid", "ibv_is_fork_initialized", "rdma_get_src_port",
			"rdma_get_dst_port", "rdma_get_local_addr", "rdma_get_peer_addr",
			// rdma_seterrno is librdmacm's own helper: it turns an errno
			// into -1 and sets errno, and is itself the convention.
			"rdma_seterrno",
			// A capability vector, 0 when the device says nothing.
			"ibv_query_qp_data_in_order"},
	},
	{
		// NULL here is an answer (not an extended QP or CQ, not a verbs
		// context), not a failure: no errno is set.
		Name: "conversions that may answer NULL", Convention: CannotFail,
		Funcs: []string{"ibv_qp_to_qp_ex", "ibv_cq_ex_to_cq", "verbs_get_ctx"},
	},
	{
		// The work-request builders and completion readers of the
		// extended QP and CQ: provider function pointers with no return
		// value, or a field of the current completion.
		Name: "extended QP and CQ accessors", Convention: CannotFail,
		Funcs: []string{"ibv_wr_start", "ibv_wr_abort", "ibv_wr_atomic_cmp_swp", "ibv_wr_atomic_fetch_add",
			"ibv_wr_atomic_write", "ibv_wr_bind_mw", "ibv_wr_local_inv", "ibv_wr_rdma_read", "ibv_wr_rdma_write",
			"ibv_wr_rdma_write_imm", "ibv_wr_flush", "ibv_wr_send", "ibv_wr_send_imm", "ibv_wr_send_inv",
			"ibv_wr_send_tso", "ibv_wr_set_ud_addr", "ibv_wr_set_xrc_srqn", "ibv_wr_set_inline_data",
			"ibv_wr_set_inline_data_list", "ibv_wr_set_sge", "ibv_wr_set_sge_list", "ibv_end_poll", "ibv_wc_read_*"},
	},
	{
		Name: "functions returning void", Convention: CannotFail,
		Funcs: []string{"ibv_free_device_list", "ibv_unimport_pd", "ibv_unimport_mr", "ibv_unimport_dm",
			"ibv_ack_async_event", "ibv_ack_cq_events", "ibv_free_buf", "rdma_destroy_event_channel",
			"rdma_destroy_ep", "rdma_destroy_qp", "rdma_free_devices", "rdma_freeaddrinfo", "rdma_destroy_srq"},
	},
	{
		Name: "constructors returning NULL with errno", Convention: NullErrno,
		Funcs: []string{"ibv_get_device_list", "ibv_open_device", "ibv_import_device", "ibv_import_pd",
			"ibv_import_mr", "ibv_import_dm", "ibv_alloc_pd", "ibv_create_flow", "ibv_create_flow_action_esp",
			"ibv_open_xrcd", "ibv_reg_mr", "ibv_reg_mr_iova", "ibv_reg_mr_iova2", "__ibv_reg_mr", "__ibv_reg_mr_iova",
			"ibv_reg_dmabuf_mr", "ibv_reg_mr_ex", "ibv_alloc_mw", "ibv_create_comp_channel", "ibv_alloc_dm",
			"ibv_alloc_null_mr", "ibv_reg_dm_mr", "ibv_create_cq", "ibv_create_cq_ex", "ibv_create_comp_cntr",
			"ibv_create_srq", "ibv_create_srq_ex", "ibv_create_qp", "ibv_create_qp_ex", "ibv_alloc_td",
			"ibv_alloc_parent_domain", "ibv_alloc_buf", "ibv_reg_buf_mr", "ibv_alloc_dmah", "ibv_open_qp",
			"ibv_create_wq", "ibv_create_rwq_ind_table", "ibv_create_ah", "ibv_create_ah_from_wc",
			"ibv_create_counters", "rdma_create_event_channel", "rdma_get_devices", "rdma_reg_msgs",
			"rdma_reg_read", "rdma_reg_write"},
	},
	{
		// ibv_rereg_mr(3): one of the negative IBV_REREG_MR_ERR_* codes,
		// errno set. The code says whether the old MR, the new one or
		// neither may still be used, which the errno cannot say.
		Name: "ibv_rereg_mr: a negative code of its own, and errno", Convention: MinusOneErrno, NegativeCode: true,
		Funcs: []string{"ibv_rereg_mr"},
	},
	{
		Name: "verbs returning -1 with errno", Convention: MinusOneErrno,
		Funcs: []string{"ibv_get_async_event", "ibv_get_cq_event", "ibv_query_gid", "ibv_query_pkey",
			"ibv_close_device", "ibv_init_ah_from_wc",
			// 0, -1 with errno (ibv_query_gid's failure, or
			// neigh_init_resources' ENOMEM), a -errno (-EINVAL,
			// -EHOSTUNREACH, -ENOSYS) or nl_connect's negative libnl
			// code, which reads as the errno of its number
			// (libibverbs/verbs.c, neigh.c): Failed takes each as
			// that order says.
			"ibv_resolve_eth_l2_from_gid"},
	},
	{
		// ibv_get_device_index(3): "an index, or -1 if the kernel doesn't
		// support device indexes"; libibverbs/device.c sets no errno.
		Name: "ibv_get_device_index: an index, or -1", Convention: CountOrError,
		Unsupported: "the kernel does not support device indexes",
		Funcs:       []string{"ibv_get_device_index"},
	},
	{
		Name: "counts, indexes and descriptors, negative on failure", Convention: CountOrError,
		Funcs: []string{"ibv_get_pkey_index", "_ibv_query_gid_table",
			"ibv_query_gid_table", "ibv_dm_export_dmabuf_fd", "ibv_export_buf_dmabuf_fd",
			// rdma_get_*_comp return the number of completions (1), or -1
			// with errno. rdma_seterrno puts ibv_poll_cq's negative
			// result in errno too, where a provider's CQ_POLL_ERR (-2)
			// cannot be told from -ENOENT: it reads as ENOENT (which
			// means nothing special here).
			"rdma_get_send_comp", "rdma_get_recv_comp"},
	},
	{
		Name: "rdma_getaddrinfo", Convention: GetaddrinfoCode,
		Funcs: []string{"rdma_getaddrinfo"},
	},
	{
		// Every other int-returning librdmacm function, the rdma_verbs.h
		// inlines (through rdma_seterrno) included.
		Name: "librdmacm: -1 with errno", Convention: MinusOneErrno,
		Funcs: []string{"rdma_*"},
	},
	{
		// What is left of libibverbs returns 0 or an errno: the
		// destructors, queries, modifies, posts and the inlines that
		// return EOPNOTSUPP when the provider lacks an op.
		Name: "verbs returning their errno", Convention: ErrnoResult,
		Funcs: []string{"ibv_post_*", "ibv_destroy_*", "ibv_dealloc_*", "ibv_dereg_mr", "ibv_close_xrcd",
			"ibv_query_device", "ibv_query_device_ex", "ibv_query_port", "___ibv_query_port", "ibv_query_port_speed",
			"_ibv_query_gid_ex", "ibv_query_gid_ex", "ibv_modify_*", "ibv_query_srq", "ibv_query_qp",
			"ibv_query_ece", "ibv_set_ece", "ibv_query_rt_values_ex", "ibv_resize_cq", "ibv_req_notify_cq",
			"ibv_get_srq_num", "ibv_bind_mw", "ibv_advise_mr", "ibv_free_dm", "ibv_memcpy_to_dm",
			"ibv_memcpy_from_dm", "ibv_attach_mcast", "ibv_detach_mcast", "ibv_fork_init",
			"ibv_attach_counters_point_flow", "ibv_read_counters",
			"ibv_wr_complete", "ibv_qp_attach_comp_cntr", "_ibv_query_comp_cntr_caps", "ibv_query_comp_cntr_caps",
			"ibv_set_comp_cntr", "ibv_set_err_comp_cntr", "ibv_inc_comp_cntr", "ibv_inc_err_comp_cntr",
			"ibv_read_comp_cntr", "ibv_read_err_comp_cntr"},
	},
}

// ErrnoCopiers are the C functions that set errno to the value they are
// given: librdmacm's rdma_seterrno (errno = ret), which the rdma_post_*,
// rdma_get_*_comp and rdma_dereg_mr inlines pass what the provider
// returned, a -errno from rxe (rdma-core 33.2), siw, cxgb4, qedr, erdma or
// bnxt_re. A stub whose C function reads errno and calls one (its Calls)
// calls it through a preamble wrapper that makes errno positive before cgo
// reads it: cgo boxes an errno of 256 and up into its error result, one
// allocation at every failed call that the stub's verberr.Site cannot
// spare. verberr.Site.Failed reads a negative errno as its negation
// anyway, wherever it comes from.
var ErrnoCopiers = []string{"rdma_seterrno"}

// readsErrno reports whether c's stub reads the errno C set.
func (c Convention) readsErrno() bool {
	return c == NullErrno || c == MinusOneErrno || c == CountOrError || c == GetaddrinfoCode
}

// copiesErrno reports whether fn's stub calls it through the wrapper that
// ErrnoCopiers describes.
func copiesErrno(fn *Func) bool {
	if !fn.Convention.readsErrno() {
		return false
	}
	for _, c := range fn.Calls {
		if slices.Contains(ErrnoCopiers, c) {
			return true
		}
	}
	return false
}

// matches reports whether rule entry pattern lists C function name.
func matches(pattern, name string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// problem says why r's NegativeCode or Unsupported cannot apply to fn, or
// "". A conventions file's rule is told in the file's words.
func (r *ConventionRule) problem(fn *Func, externs map[string]bool) string {
	conv, negative := fmt.Sprintf("convention %q", r.Convention), "NegativeCode"
	countOrError := fmt.Sprintf("%q", CountOrError)
	if r.Source != "" {
		conv, negative, countOrError = r.Convention.Keyword(), negativeCodeKeyword, CountOrError.Keyword()
	}
	if r.Unsupported != "" && (r.Convention != CountOrError || r.NegativeCode) {
		return fmt.Sprintf("%s cannot have Unsupported (only %s without %s)", conv, countOrError, negative)
	}
	if !r.NegativeCode {
		return ""
	}
	switch r.Convention {
	case ErrnoResult, MinusOneErrno:
		return ""
	case CountOrError:
		if fn.Kind != FuncInline {
			return fmt.Sprintf("%s with %s needs a static inline: a missing extern's -1 would read as code -1", negative, conv)
		}
		for _, c := range fn.Calls {
			if externs[c] {
				return fmt.Sprintf("%s with %s needs a function that calls no extern: %s's absence (-1) would read as code -1", negative, conv, c)
			}
		}
		return ""
	}
	return fmt.Sprintf("%s cannot have %s", conv, negative)
}

// AssignConventions gives every function of ir (those behind a macro
// included) its convention from rules, the first rule that lists it. It
// fails on a rule that does not fit a function's result type, naming the
// function's file:line (and the rule's, for a conventions file's rule);
// failing that, on functions no rule lists with a *MissingConventionsError
// that has them all, every other function assigned. Entries that matched
// nothing are added to ir.StalePatches, and those of a conventions file
// to ir.Warnings too.
func AssignConventions(ir *IR, rules []ConventionRule) error {
	used := map[string]bool{}
	type problem struct {
		pos Pos
		msg string
	}
	var errs []problem
	var missing []*Func
	externs := map[string]bool{}
	for _, fn := range append(append([]*Func(nil), ir.Funcs...), ir.Shadowed...) {
		if fn.Kind == FuncExtern {
			externs[fn.Name] = true
		}
	}
	for _, fn := range append(append([]*Func(nil), ir.Funcs...), ir.Shadowed...) {
		fn.Convention, fn.ConventionRule, fn.NegativeCode, fn.Unsupported = Unassigned, "", false, ""
	rules:
		for _, r := range rules {
			for _, p := range r.Funcs {
				if !matches(p, fn.Name) {
					continue
				}
				used[r.Name+"\x00"+p] = true
				if !r.Convention.fits(fn.Result) {
					msg := fmt.Sprintf("%s: %s returns %s, which convention %q of rule %q (entry %q) cannot describe",
						fn.Pos, fn.Name, cDecl(fn.Result, ""), r.Convention, r.Name, p)
					if r.Source != "" {
						msg = fmt.Sprintf("%s: %s %s does not fit %s (%s), which returns %s: %s",
							r.Source, p, r.Convention.Keyword(), fn.Name, fn.Pos, cDecl(fn.Result, ""), fitsWhat(fn.Result))
					}
					errs = append(errs, problem{fn.Pos, msg})
				}
				if msg := r.problem(fn, externs); msg != "" {
					if r.Source != "" {
						msg = fmt.Sprintf("%s: %s (%s): %s", r.Source, fn.Name, fn.Pos, msg)
					} else {
						msg = fmt.Sprintf("%s: %s: rule %q (entry %q): %s", fn.Pos, fn.Name, r.Name, p, msg)
					}
					errs = append(errs, problem{fn.Pos, msg})
				}
				fn.Convention, fn.ConventionRule = r.Convention, r.Name
				fn.NegativeCode, fn.Unsupported = r.NegativeCode, r.Unsupported
				break rules
			}
		}
		if fn.Convention == Unassigned {
			missing = append(missing, fn)
		}
		if fn.NoRDMA != nil && fn.Convention == CannotFail {
			errs = append(errs, problem{fn.Pos, fmt.Sprintf("%s: %s has a NoRDMA entry, but cannot fail (error convention %q, rule %q): it has no error to mark",
				fn.Pos, fn.Name, fn.Convention, fn.ConventionRule)})
		}
	}
	for _, r := range rules {
		for _, p := range r.Funcs {
			if used[r.Name+"\x00"+p] {
				continue
			}
			if r.Source != "" {
				w := fmt.Sprintf("%s: %s matches no function in these headers", r.Source, p)
				ir.Warnings = append(ir.Warnings, w)
				ir.StalePatches = append(ir.StalePatches, "conventions file "+w)
				continue
			}
			ir.StalePatches = append(ir.StalePatches, fmt.Sprintf("convention rule %q: %s", r.Name, p))
		}
	}
	if len(errs) > 0 {
		// One line, the first in source order, as every generator error;
		// VERBSGEN_DEBUG lists them all.
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].pos.less(errs[j].pos) })
		more := ""
		if len(errs) > 1 {
			more = fmt.Sprintf(" (and %d more functions)", len(errs)-1)
		}
		if os.Getenv("VERBSGEN_DEBUG") != "" {
			for _, e := range errs {
				fmt.Fprintln(os.Stderr, e.msg)
			}
		}
		return fmt.Errorf("%s%s", errs[0].msg, more)
	}
	sort.SliceStable(missing, func(i, j int) bool { return missing[i].Pos.less(missing[j].Pos) })
	ir.NoConvention = missing
	if len(missing) > 0 {
		return &MissingConventionsError{IR: ir, Funcs: missing}
	}
	return nil
}

// fitsWhat says which conventions a result of type t fits, in a
// conventions file's words.
func fitsWhat(t *Type) string {
	cs := fitting(t)
	words := make([]string, len(cs))
	for i, c := range cs {
		words[i] = c.Keyword()
	}
	if len(words) == 1 {
		return "only " + words[0] + " fits it"
	}
	return "it fits " + strings.Join(words, ", ")
}
