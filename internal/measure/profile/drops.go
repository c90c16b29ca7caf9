package profile

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// dropReasons names kfree_skb's reason codes from the kernel's own enum
// skb_drop_reason (BTF), so that names follow the running kernel.
type dropReasons map[uint32]string

func dropReasonNames() dropReasons {
	r := dropReasons{}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return r
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		return r
	}
	for _, v := range e.Values {
		r[uint32(v.Value)] = strings.ToLower(strings.TrimPrefix(v.Name, "SKB_DROP_REASON_"))
	}
	return r
}

func (r dropReasons) name(code uint32) string {
	if n, ok := r[code]; ok {
		return n
	}
	return fmt.Sprintf("reason_%d", code)
}
