package testkit

import (
	"maps"
	"strings"
	"testing"
)

// parseResourceCounts reads what iproute2's rdma prints and refuses what
// it cannot read, which the callers would otherwise compare as equal.
func TestParseResourceCounts(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      map[string]int
		err       string // in the error; "" for none
	}{
		{
			// `rdma resource show rxe0` in the VM, with one Context, PD,
			// CQ and QP open.
			name: "iproute2 6.1 on Linux 6.1 (the VM's)",
			out:  "0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 1 srq 0 \n",
			want: map[string]int{"pd": 1, "cq": 1, "qp": 1, "cm_id": 0, "mr": 0, "ctx": 1, "srq": 0},
		},
		{
			name: "no srq count (an older kernel)",
			out:  "0: rxe0: pd 1 cq 0 qp 0 cm_id 0 mr 0 ctx 1 \n",
			want: map[string]int{"pd": 1, "cq": 0, "qp": 0, "cm_id": 0, "mr": 0, "ctx": 1},
		},
		{name: "nothing", out: "", err: "no count of pd, cq, qp, cm_id, mr, ctx"},
		{name: "no cm_id", out: "0: rxe0: pd 1 cq 0 qp 0 mr 0 ctx 1 srq 0\n", err: "no count of cm_id"},
		{name: "another layout", out: "rxe0: pd=1 cq=0 qp=0 cm_id=0 mr=0 ctx=1\n", err: "no count of pd"},
		{ // `rdma resource show`, no device named, in the VM
			name: "two devices",
			out:  "0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 1 srq 0 \n1: rxe1: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 1 srq 0 \n",
			err:  "pd counted twice",
		},
		{name: "a count of 12", out: "0: rxe0: pd 12 cq 1 qp 1 cm_id 0 mr 0 ctx 1 srq 0 \n",
			want: map[string]int{"pd": 12, "cq": 1, "qp": 1, "cm_id": 0, "mr": 0, "ctx": 1, "srq": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseResourceCounts(tc.out)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("%q: %v", tc.out, err)
			case tc.err == "" && !maps.Equal(got, tc.want):
				t.Fatalf("%q: %v, want %v", tc.out, got, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%q: %v, %v; want an error with %q", tc.out, got, err, tc.err)
			}
		})
	}
}
