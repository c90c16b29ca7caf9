package main

// The eBPF data plane registers itself with internal/topo (topo.EBPF) for
// the veth-ebpf and macvlan-ebpf modes.
import _ "github.com/vnetlab/vnetlab/internal/service/ebpf"
