package gen

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
		},
	}
}
