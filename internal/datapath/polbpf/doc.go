// Package polbpf is vnetlab's NetworkPolicy data plane: the tc programs of
// bpf/policy.c on pods' own interfaces, their maps pinned in a directory
// the caller names, and every write of them. It takes the compiled policies
// (netpol.Rules) and interfaces (a namespace and a name), never a lab: the
// lab's `ebpf` policy provider (internal/platform/labpolicy/ebpf.go) and a
// Kubernetes node's policy controller drive it alike.
//
//   - plane.go: Open (the pinned maps; the programs once something is
//     attached), Close, Remove;
//   - attach.go: Attach, Detach, Attached, Pinned (tcx links on a pod's interface,
//     pinned under the directory's links/);
//   - compile.go: netpol.Rules to map entries (identities, prefixes, rule
//     keys with port prefixes);
//   - load.go: Load (fresh maps filled, swapped in, the generation bumped);
//   - read.go: Counters, Objects (what the proof of a cell reads back);
//   - flows.go: how long a flow's entries outlive its last packet.
//
// bpf/policy.h has the design; docs/policies.md compares it with Cilium's.
package polbpf
