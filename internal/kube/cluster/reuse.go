package cluster

import (
	"fmt"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// Differs says how an existing cluster's state differs from spec ("" when
// it was built the same way: nodes, proxy, CNI and its mode, socket LB,
// NetworkPolicy enforcer), so a run that
// names a cluster can reuse it instead of building another.
func (s Spec) Differs(st *lab.State) string {
	have, want := Network(st), s.Network()
	switch {
	case len(st.Nodes) != s.Nodes:
		return strconv.Itoa(len(st.Nodes)) + " nodes, not " + strconv.Itoa(s.Nodes)
	case have.Proxy != want.Proxy:
		return fmt.Sprintf("proxy %s, not %s", have.Proxy, want.Proxy)
	case have.CNI != want.CNI || have.CNIMode != want.CNIMode:
		return fmt.Sprintf("CNI %s, not %s", have.CNIText(), want.CNIText())
	case have.SocketLB != want.SocketLB:
		return fmt.Sprintf("socket LB %t, not %t", have.SocketLB, want.SocketLB)
	case have.Policy != want.Policy:
		return fmt.Sprintf("NetworkPolicy enforcer %s, not %s", have.Policy, want.Policy)
	}
	return ""
}
