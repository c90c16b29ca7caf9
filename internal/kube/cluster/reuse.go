package cluster

import (
	"fmt"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/lab"
)

// Differs says how an existing cluster's state differs from spec ("" when
// it was built the same way: nodes, proxy, CNI and its mode, socket LB), so a run that
// names a cluster can reuse it instead of building another.
func (s Spec) Differs(st *lab.State) string {
	switch {
	case len(st.Nodes) != s.Nodes:
		return strconv.Itoa(len(st.Nodes)) + " nodes, not " + strconv.Itoa(s.Nodes)
	case st.Facts[FactProxy] != s.Proxy:
		return fmt.Sprintf("proxy %s, not %s", st.Facts[FactProxy], s.Proxy)
	case st.Facts[FactCNI] != s.cniFact():
		return fmt.Sprintf("CNI %s, not %s", st.Facts[FactCNI], s.cniFact())
	case (st.Facts[FactSocketLB] == "true") != s.SocketLB:
		return fmt.Sprintf("socket LB %t, not %t", st.Facts[FactSocketLB] == "true", s.SocketLB)
	}
	return ""
}
