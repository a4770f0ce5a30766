package gen

import "syscall"

// Roots are the headers verbsgen reads: everything they include from
// infiniband/ and rdma/ is covered too.
var Roots = []string{"infiniband/verbs.h", "rdma/rdma_cma.h", "rdma/rdma_verbs.h"}

// Packages is the table of generated packages for rdma-core: which headers
// each owns, how its names read, what it links.
func Packages() []PackageSpec {
	return []PackageSpec{
		{
			Name: "verbs",
			Headers: []string{"infiniband/verbs.h", "infiniband/verbs_api.h",
				"infiniband/ib_user_ioctl_verbs.h", "rdma/ib_user_verbs.h"},
			Includes: []string{"infiniband/verbs.h"},
			Library:  Library{Soname: "libibverbs.so.1", Package: "libibverbs1"},
			Prefixes: []Prefix{
				{"ibv_", ""}, {"IBV_", ""},
				{"ib_uverbs_", "Uverbs"}, {"IB_UVERBS_", "Uverbs"},
				{"IB_USER_VERBS_", "UserVerbs"}, {"ib_user_verbs_", "UserVerbs"},
				{"verbs_", "Verbs"}, {"VERBS_", "Verbs"},
			},
			EnumPrefixes: map[string]Prefix{
				// IBV_WR_SEND would collide with the function ibv_wr_send.
				"ibv_wr_opcode": {"IBV_WR_", "WROp"},
				// IBV_QP_CAP and IBV_QP_STATE would collide with struct ibv_qp_cap and enum ibv_qp_state.
				"ibv_qp_attr_mask": {"IBV_QP_", "QPAttr"},
				// IBV_FLOW_SPEC_ETH would collide with struct ibv_flow_spec_eth.
				"ibv_flow_spec_type": {"IBV_FLOW_SPEC_", "FlowSpecType"},
				// The ESP enumerators would collide with the structs of the same names.
				"ib_uverbs_flow_action_esp_keymat": {"IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_", "UverbsESPKeymat"},
				"ib_uverbs_flow_action_esp_replay": {"IB_UVERBS_FLOW_ACTION_ESP_REPLAY_", "UverbsESPReplay"},
			},
			Renames: map[string]string{
				// Integer macros naming the ESP enumerators; their lower-case
				// twins name the structs.
				"IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM": "ESPKeymatAesGcm",
				"IBV_FLOW_ACTION_ESP_REPLAY_BMP":     "ESPReplayBmp",
			},
			DataPath: []string{"ibv_post_", "ibv_poll_cq", "ibv_req_notify_cq", "ibv_start_poll",
				"ibv_next_poll", "ibv_end_poll", "ibv_wc_read_", "ibv_wr_"},
			Retypes: verbsRetypes,
			NoRDMA: map[string]NoRDMA{
				"ibv_get_device_list": {Errno: syscall.ENOSYS,
					Says: "this kernel has no RDMA support: no /sys/class/infiniband_verbs",
					Reason: "libibverbs/init.c: find_sysfs_devs returns ENOSYS when it cannot open " +
						"/sys/class/infiniband_verbs (after RDMA netlink failed too), check_abi_version when " +
						"its abi_version is missing or out of range; the loader's ENOSYS for a missing " +
						"function is told apart by the site"},
			},
		},
		{
			Name:     "rdmacm",
			Headers:  []string{"rdma/rdma_cma.h", "rdma/rdma_verbs.h", "infiniband/sa.h"},
			Includes: []string{"rdma/rdma_cma.h", "rdma/rdma_verbs.h"},
			Library:  Library{Soname: "librdmacm.so.1", Package: "librdmacm1"},
			Prefixes: []Prefix{
				{"rdma_", ""}, {"RDMA_", ""},
				{"ibv_sa_", "SA"}, {"IBV_SA_", "SA"}, {"ibv_", ""}, {"IBV_", ""},
			},
			DataPath: []string{"rdma_post_", "rdma_get_send_comp", "rdma_get_recv_comp"},
			Retypes:  rdmacmRetypes,
			NoRDMA: map[string]NoRDMA{
				"rdma_get_devices":          rdmacmNoDevice,
				"rdma_create_event_channel": rdmacmNoDevice,
			},
		},
	}
}

// rdmacmNoDevice is librdmacm's ENODEV from ucma_init, the first step of
// rdma_get_devices and rdma_create_event_channel.
var rdmacmNoDevice = NoRDMA{Errno: syscall.ENODEV,
	Says: "librdmacm found no RDMA device: this kernel has no RDMA support, or no device is set up",
	Reason: "librdmacm/cma.c: ucma_init's sync_devices_list returns ENODEV when ibv_get_device_list " +
		"fails (no RDMA in the kernel) or finds no device, which it does not tell apart"}

// access is the reason of the Retypes entries that carry memory access rights.
const access = "IBV_ACCESS_* flags (ibv_reg_mr(3))"

// verbsRetypes are verbs' Retypes: every integer that verbs.h or its man
// page says carries an enum's flags or values, when the sizes allow. Left
// out, because the integer is wider than the enum's 4 bytes (or narrower)
// and Go cannot hold it in the enum's type: ibv_cq_init_attr_ex.wc_flags
// (uint64_t, enum ibv_create_cq_wc_flags), ibv_qp_init_attr_ex.
// send_ops_flags (uint64_t, enum ibv_qp_create_send_ops_flags),
// ibv_mr_init_attr.comp_mask (uint64_t), ibv_device_attr_ex.
// device_cap_flags_ex (uint64_t, with bits above 32 that are macros, not
// enumerators), ibv_odp_caps.general_caps, ibv_rss_caps.
// rx_hash_fields_mask and ibv_rx_hash_conf.rx_hash_fields_mask (uint64_t),
// rx_hash_function (uint8_t), ibv_port_attr.port_cap_flags2 (uint16_t),
// ibv_pci_atomic_caps (uint16_t) and ibv_dmah_init_attr.tph_mem_type
// (uint8_t). Left out for another reason: ibv_advise_mr's flags, whose
// value IBV_ADVISE_MR_FLAG_FLUSH is an int macro, not an enumerator; the
// kernel ABI structs of rdma/ib_user_verbs.h, which keep the kernel's
// integers.
var verbsRetypes = map[string]Retype{
	// Memory registration: every variant's access.
	"ibv_reg_mr.access":                {"ibv_access_flags", access},
	"__ibv_reg_mr.access":              {"ibv_access_flags", access},
	"ibv_reg_mr_iova.access":           {"ibv_access_flags", access},
	"__ibv_reg_mr_iova.access":         {"ibv_access_flags", access},
	"ibv_reg_mr_iova2.access":          {"ibv_access_flags", access},
	"ibv_reg_dmabuf_mr.access":         {"ibv_access_flags", access},
	"ibv_rereg_mr.access":              {"ibv_access_flags", "IBV_ACCESS_* flags (ibv_rereg_mr(3))"},
	"ibv_rereg_mr.flags":               {"ibv_rereg_mr_flags", "IBV_REREG_MR_CHANGE_* flags (ibv_rereg_mr(3))"},
	"ibv_reg_dm_mr.access":             {"ibv_access_flags", "IBV_ACCESS_* flags, IBV_ACCESS_ZERO_BASED required (ibv_alloc_dm(3))"},
	"ibv_reg_buf_mr.access":            {"ibv_access_flags", "the same flags as ibv_reg_mr's (ibv_alloc_buf(3))"},
	"ibv_mr_init_attr.access":          {"ibv_access_flags", "IBV_ACCESS_* flags of ibv_reg_mr_ex"},
	"ibv_mw_bind_info.mw_access_flags": {"ibv_access_flags", "IBV_ACCESS_* flags for the bound window (verbs.h: \"use ibv_access_flags\")"},
	"ibv_qp_attr.qp_access_flags":      {"ibv_access_flags", "IBV_ACCESS_REMOTE_* flags of a QP (ibv_modify_qp(3))"},

	// Attribute masks of the modify and query verbs.
	"ibv_modify_qp.attr_mask":      {"ibv_qp_attr_mask", "IBV_QP_* attribute mask (ibv_modify_qp(3))"},
	"ibv_query_qp.attr_mask":       {"ibv_qp_attr_mask", "IBV_QP_* attribute mask (ibv_query_qp(3))"},
	"ibv_modify_srq.srq_attr_mask": {"ibv_srq_attr_mask", "IBV_SRQ_MAX_WR and IBV_SRQ_LIMIT (ibv_modify_srq(3))"},
	"ibv_modify_cq_attr.attr_mask": {"ibv_cq_attr_mask", "IBV_CQ_ATTR_* mask (ibv_modify_cq(3))"},
	"ibv_wq_attr.attr_mask":        {"ibv_wq_attr_mask", "IBV_WQ_ATTR_* mask (verbs.h: \"enum ibv_wq_attr_mask\")"},
	"ibv_wq_attr.flags":            {"ibv_wq_flags", "IBV_WQ_FLAGS_* (verbs.h: \"Use ibv_wq_flags\")"},
	"ibv_wq_attr.flags_mask":       {"ibv_wq_flags", "IBV_WQ_FLAGS_* (verbs.h: \"Use ibv_wq_flags\")"},
	"ibv_query_qp_data_in_order.flags": {"ibv_query_qp_data_in_order_flags",
		"IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS and _DEVICE_ONLY (ibv_query_qp_data_in_order(3))"},
	"ibv_query_qp_data_in_order.return": {"ibv_query_qp_data_in_order_caps",
		"a vector of IBV_QUERY_QP_DATA_IN_ORDER_* capabilities, or 1 for IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG (ibv_query_qp_data_in_order(3))"},
	"ibv_read_counters.flags": {"ibv_read_counters_flags", "IBV_READ_COUNTERS_ATTR_* (ibv_read_counters(3))"},

	// Work requests and completions.
	"ibv_send_wr.send_flags":      {"ibv_send_flags", "IBV_SEND_* flags (ibv_post_send(3))"},
	"ibv_mw_bind.send_flags":      {"ibv_send_flags", "IBV_SEND_* flags (ibv_bind_mw(3))"},
	"ibv_qp_ex.wr_flags":          {"ibv_send_flags", "IBV_SEND_* flags (ibv_wr_post(3); verbs.h: \"bitmask from enum ibv_send_flags\")"},
	"ibv_ops_wr.flags":            {"ibv_ops_flags", "IBV_OPS_* flags (ibv_post_srq_ops(3))"},
	"ibv_wc.wc_flags":             {"ibv_wc_flags", "IBV_WC_* flags (ibv_poll_cq(3))"},
	"ibv_wc_read_wc_flags.return": {"ibv_wc_flags", "IBV_WC_* flags of the current completion (ibv_create_cq_ex(3))"},

	// Creation attributes: what is set (comp_mask) and how.
	"ibv_qp_init_attr_ex.comp_mask":         {"ibv_qp_init_attr_mask", "IBV_QP_INIT_ATTR_* (ibv_create_qp_ex(3))"},
	"ibv_qp_init_attr_ex.create_flags":      {"ibv_qp_create_flags", "IBV_QP_CREATE_* (ibv_create_qp_ex(3))"},
	"ibv_qp_open_attr.comp_mask":            {"ibv_qp_open_attr_mask", "IBV_QP_OPEN_ATTR_* (ibv_open_qp(3))"},
	"ibv_srq_init_attr_ex.comp_mask":        {"ibv_srq_init_attr_mask", "IBV_SRQ_INIT_ATTR_* (ibv_create_srq_ex(3))"},
	"ibv_wq_init_attr.comp_mask":            {"ibv_wq_init_attr_mask", "IBV_WQ_INIT_ATTR_* (verbs.h: \"Use ibv_wq_init_attr_mask\")"},
	"ibv_wq_init_attr.create_flags":         {"ibv_wq_flags", "IBV_WQ_FLAGS_* (verbs.h: \"use ibv_wq_flags\")"},
	"ibv_cq_init_attr_ex.comp_mask":         {"ibv_cq_init_attr_mask", "IBV_CQ_INIT_ATTR_MASK_* (ibv_create_cq_ex(3))"},
	"ibv_cq_init_attr_ex.flags":             {"ibv_create_cq_attr_flags", "IBV_CREATE_CQ_ATTR_* (ibv_create_cq_ex(3))"},
	"ibv_xrcd_init_attr.comp_mask":          {"ibv_xrcd_init_attr_mask", "IBV_XRCD_INIT_ATTR_* (ibv_open_xrcd(3))"},
	"ibv_flow_attr.flags":                   {"ibv_flow_flags", "IBV_FLOW_ATTR_FLAGS_* (ibv_create_flow(3))"},
	"ibv_flow_action_esp_attr.comp_mask":    {"ibv_flow_action_esp_mask", "IBV_FLOW_ACTION_ESP_MASK_* (verbs.h: \"Use enum ibv_flow_action_esp_mask\")"},
	"ibv_parent_domain_init_attr.comp_mask": {"ibv_parent_domain_init_attr_mask", "IBV_PARENT_DOMAIN_INIT_ATTR_* (ibv_alloc_parent_domain(3))"},
	"ibv_dmah_init_attr.comp_mask":          {"ibv_dmah_init_attr_mask", "IBV_DMAH_INIT_ATTR_MASK_* (ibv_alloc_dmah(3))"},
	"ibv_values_ex.comp_mask":               {"ibv_values_mask", "IBV_VALUES_MASK_* (ibv_query_rt_values_ex(3))"},
	"ibv_qp_attach_comp_cntr_attr.op_mask":  {"ibv_qp_attach_comp_cntr_op", "IBV_QP_ATTACH_COMP_CNTR_OP_* (verbs.h: \"Bitmask of ibv_qp_attach_comp_cntr_op\")"},
	"ibv_dm.comp_mask":                      {"ibv_dm_mask", "IBV_DM_MASK_* the library sets (verbs.h)"},
	"ibv_gid_entry.gid_type":                {"ibv_gid_type", "an IBV_GID_TYPE_* value (ibv_query_gid_ex(3); verbs.h: \"enum ibv_gid_type\")"},

	// What a device and a port report they can do.
	"ibv_device_attr.device_cap_flags":            {"ibv_device_cap_flags", "IBV_DEVICE_* flags (ibv_query_device(3))"},
	"ibv_device_attr_ex.raw_packet_caps":          {"ibv_raw_packet_caps", "IBV_RAW_PACKET_CAP_* (verbs.h: \"Use ibv_raw_packet_caps\")"},
	"ibv_device_attr_ex.xrc_odp_caps":             {"ibv_odp_transport_cap_bits", "IBV_ODP_SUPPORT_* for XRC (ibv_query_device_ex(3))"},
	"ibv_odp_caps.per_transport_caps.rc_odp_caps": {"ibv_odp_transport_cap_bits", "IBV_ODP_SUPPORT_* for RC (ibv_query_device_ex(3))"},
	"ibv_odp_caps.per_transport_caps.uc_odp_caps": {"ibv_odp_transport_cap_bits", "IBV_ODP_SUPPORT_* for UC (ibv_query_device_ex(3))"},
	"ibv_odp_caps.per_transport_caps.ud_odp_caps": {"ibv_odp_transport_cap_bits", "IBV_ODP_SUPPORT_* for UD (ibv_query_device_ex(3))"},
	"ibv_tm_caps.flags":                           {"ibv_tm_cap_flags", "IBV_TM_CAP_* (verbs.h: \"From enum ibv_tm_cap_flags\")"},
	"ibv_comp_cntr_caps.supported_qp_attach_ops":  {"ibv_qp_attach_comp_cntr_op", "IBV_QP_ATTACH_COMP_CNTR_OP_* (verbs.h: \"Bitmask of ibv_qp_attach_comp_cntr_op\")"},
	"ibv_port_attr.port_cap_flags":                {"ibv_port_cap_flags", "IBV_PORT_* capability flags (ibv_query_port(3))"},
}

// sendFlags is the reason of rdmacm's Retypes entries.
const sendFlags = "IBV_SEND_* flags, copied into the work request's send_flags (rdma_verbs.h)"

// rdmacmRetypes are rdmacm's Retypes, which may name verbs' enums: package
// rdmacm imports verbs. rdma_addrinfo.ai_flags is left out: its RAI_*
// values are macros, not an enum's.
var rdmacmRetypes = map[string]Retype{
	"rdma_post_send.flags":    {"ibv_send_flags", sendFlags},
	"rdma_post_sendv.flags":   {"ibv_send_flags", sendFlags},
	"rdma_post_write.flags":   {"ibv_send_flags", sendFlags},
	"rdma_post_writev.flags":  {"ibv_send_flags", sendFlags},
	"rdma_post_read.flags":    {"ibv_send_flags", sendFlags},
	"rdma_post_readv.flags":   {"ibv_send_flags", sendFlags},
	"rdma_post_ud_send.flags": {"ibv_send_flags", sendFlags},
	"rdma_init_qp_attr.qp_attr_mask": {"ibv_qp_attr_mask",
		"the IBV_QP_* mask of the attributes it filled in, for ibv_modify_qp (rdma_init_qp_attr(3))"},
	"rdma_addrinfo.ai_qp_type":           {"ibv_qp_type", "an IBV_QPT_* value (rdma_getaddrinfo(3))"},
	"rdma_addrinfo.ai_port_space":        {"rdma_port_space", "an RDMA_PS_* value (rdma_getaddrinfo(3))"},
	"rdma_cm_join_mc_attr_ex.comp_mask":  {"rdma_cm_join_mc_attr_mask", "RDMA_CM_JOIN_MC_ATTR_* (rdma_join_multicast_ex(3))"},
	"rdma_cm_join_mc_attr_ex.join_flags": {"rdma_cm_mc_join_flags", "an RDMA_MC_JOIN_FLAG_* (rdma_join_multicast_ex(3))"},
}
