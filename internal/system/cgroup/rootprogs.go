package cgroup

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// cgroupAttachTypes are the attach points of a cgroup's programs.
var cgroupAttachTypes = map[string]ebpf.AttachType{
	"ingress": ebpf.AttachCGroupInetIngress, "egress": ebpf.AttachCGroupInetEgress,
	"sock_create": ebpf.AttachCGroupInetSockCreate, "sock_release": ebpf.AttachCgroupInetSockRelease,
	"sock_ops": ebpf.AttachCGroupSockOps, "device": ebpf.AttachCGroupDevice, "sysctl": ebpf.AttachCGroupSysctl,
	"bind4": ebpf.AttachCGroupInet4Bind, "bind6": ebpf.AttachCGroupInet6Bind,
	"connect4": ebpf.AttachCGroupInet4Connect, "connect6": ebpf.AttachCGroupInet6Connect,
	"post_bind4": ebpf.AttachCGroupInet4PostBind, "post_bind6": ebpf.AttachCGroupInet6PostBind,
	"sendmsg4": ebpf.AttachCGroupUDP4Sendmsg, "sendmsg6": ebpf.AttachCGroupUDP6Sendmsg,
	"recvmsg4": ebpf.AttachCGroupUDP4Recvmsg, "recvmsg6": ebpf.AttachCGroupUDP6Recvmsg,
	"getpeername4": ebpf.AttachCgroupInet4GetPeername, "getpeername6": ebpf.AttachCgroupInet6GetPeername,
	"getsockname4": ebpf.AttachCgroupInet4GetSockname, "getsockname6": ebpf.AttachCgroupInet6GetSockname,
	"getsockopt": ebpf.AttachCGroupGetsockopt, "setsockopt": ebpf.AttachCGroupSetsockopt,
}

// RootPrograms describes the programs attached to the cgroup v2 root itself
// ("" = none), as "ATTACH:ID,..." sorted by attach point: what no lab or
// cluster may ever add to (every process of the machine runs below it).
func RootPrograms() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	f, err := os.Open(root)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var out []string
	for name, at := range cgroupAttachTypes {
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: at})
		if err != nil {
			return "", fmt.Errorf("query %s programs of %s: %w", name, root, err)
		}
		for _, p := range res.Programs {
			out = append(out, fmt.Sprintf("%s:%d", name, p.ID))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ","), nil
}
