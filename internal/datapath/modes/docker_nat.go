package modes

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// docker-nat: Docker's default bridge network (seeds 000 and 004: docker0 +
// veth + NAT). Containers sit on docker0 (gateway .1), leave through
// MASQUERADE, and the first pod's ports are published on the node with DNAT
// in a DOCKER chain, the rule shape dockerd writes.
//
// 127.0.0.1:PORT on the node is served the way dockerd does with
// userland-proxy=false: the OUTPUT chain DNATs loopback too,
// route_localnet=1 on docker0 lets 127.0.0.1-sourced packets be routed, and
// MASQUERADE of locally sourced packets leaving on docker0 fixes the source;
// ports are in hairpin mode so a container can reach its own published port.
// (With the default userland-proxy=true dockerd runs docker-proxy instead.)
func init() {
	Register(Mode{
		Name:     DockerNAT,
		MaxPods:  bridgePorts("docker0", ""),
		Seeds:    []Seed{SeedInterfaces, SeedDocker},
		Summary:  "Docker bridge network: docker0 + MASQUERADE + published-port DNAT, userland-proxy=false (seeds 000, 004)",
		Requires: []kernel.Feature{kernel.Veth, kernel.Bridge, kernel.BrNetfilter},
		Options: []Option{{Name: "publish", Default: DefaultPublished, Help: "node ports published to the first pod (tcp and udp), comma-separated",
			Check: func(v string) error { _, err := parsePorts(v); return err }}},
		Build:    buildDockerNAT,
		Services: Services{Reach: ReachNodeNetfilter, EBPF: EBPFNodeVeth},
		IPv6:     true,
	})
}

// DefaultPublished are the ports vnetlab's engines listen on
// (iperf3 5201, sockperf 11111, the built-in rr engine 7001).
const DefaultPublished = "5201,11111,7001"

func buildDockerNAT(env *Env) error {
	ports, err := parsePorts(env.Option("publish", DefaultPublished))
	if err != nil {
		return err
	}
	br, err := BridgeWithGateway(env, "docker0", env.Prefix())
	if err != nil {
		return err
	}
	gw := NthIP(env.PodNet, 1)
	if err := AttachPodsToBridge(env, br, gw); err != nil {
		return err
	}
	for i, pod := range env.Pods {
		l, err := env.Node.H.LinkByName(HostIfname("veth-", pod.Pod, i))
		if err != nil {
			return err
		}
		if err := env.Node.H.LinkSetHairpin(l, true); err != nil {
			return fmt.Errorf("hairpin on %s: %w", l.Attrs().Name, err)
		}
	}
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1", "net.bridge.bridge-nf-call-iptables", "1",
		"net.ipv4.conf.docker0.route_localnet", "1"); err != nil {
		return err
	}
	server, client := env.Pods[0], env.Pods[1]
	if server.IP != nil {
		if err := IptablesRestore(env.Node.Name, dockerNATRules(env.PodNet, server.IP, ports)); err != nil {
			return err
		}
	}
	if server.IP6 != nil {
		if err := dockerNAT6(env, server, ports); err != nil {
			return err
		}
	}
	node, node6 := env.NodeIP.String(), ipText(env.Nodes[0].IP6)
	env.Paths = map[string]Endpoint{
		"pod": {ServerNS: server.Name, ClientNS: client.Name, Target: ipText(server.IP), Target6: ipText(server.IP6),
			Note: fmt.Sprintf("%s -> %s by container IP (seed 004: 21.0 Gbit/s)", client.Pod, server.Pod)},
		"published": {ServerNS: server.Name, ClientNS: env.Ext.Name, Target: node, Target6: node6,
			Note: "another host -> node IP:published port (DNAT in PREROUTING)"},
		"published-local": {ServerNS: server.Name, ClientNS: env.Node.Name, Target: "127.0.0.1",
			Note: "node -> 127.0.0.1:published port (OUTPUT DNAT, route_localnet; seed 000: 34.9 Gbit/s)"},
		"published-hairpin": {ServerNS: server.Name, ClientNS: client.Name, Target: node, Target6: node6,
			Note: fmt.Sprintf("%s -> node IP:published port -> %s (seed 004's slow path: 8.0 Gbit/s)", client.Pod, server.Pod)},
	}
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(p))
	}
	env.Facts = map[string]string{"published": strings.Join(ps, ",") + " -> " + server.Pod,
		"localhost": "iptables hairpin NAT + route_localnet (dockerd --userland-proxy=false)"}
	return nil
}

// dockerNATRules are the nat and filter tables dockerd writes, for the
// family of target (the first container's address; podNet the
// containers' network), for iptables-restore or ip6tables-restore.
// 127.0.0.1 is published through route_localnet; IPv6 has no such thing
// (a ::1-sourced packet never leaves the node), so its tables lack that
// MASQUERADE and the published-local path has no IPv6 address.
func dockerNATRules(podNet *net.IPNet, target net.IP, ports []int) string {
	v6 := target.To4() == nil
	host, to := "/32", target.String()
	if v6 {
		host, to = "/128", "["+to+"]"
	}
	var nat, filter strings.Builder
	fmt.Fprintf(&nat, "*nat\n:DOCKER - [0:0]\n")
	fmt.Fprintf(&nat, "-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n")
	fmt.Fprintf(&nat, "-A OUTPUT -m addrtype --dst-type LOCAL -j DOCKER\n")
	fmt.Fprintf(&nat, "-A POSTROUTING -s %s ! -o docker0 -j MASQUERADE\n", podNet)
	if !v6 {
		fmt.Fprintf(&nat, "-A POSTROUTING -o docker0 -m addrtype --src-type LOCAL -j MASQUERADE\n")
	}
	fmt.Fprintf(&filter, "*filter\n:DOCKER - [0:0]\n")
	fmt.Fprintf(&filter, "-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n")
	fmt.Fprintf(&filter, "-A FORWARD -o docker0 -j DOCKER\n")
	fmt.Fprintf(&filter, "-A FORWARD -i docker0 ! -o docker0 -j ACCEPT\n")
	fmt.Fprintf(&filter, "-A FORWARD -i docker0 -o docker0 -j ACCEPT\n")
	for _, p := range ports {
		for _, proto := range []string{"tcp", "udp"} {
			fmt.Fprintf(&nat, "-A POSTROUTING -s %s%s -d %s%s -p %s --dport %d -j MASQUERADE\n", target, host, target, host, proto, p)
			fmt.Fprintf(&nat, "-A DOCKER -p %s --dport %d -j DNAT --to-destination %s:%d\n", proto, p, to, p)
			fmt.Fprintf(&filter, "-A DOCKER -d %s%s ! -i docker0 -o docker0 -p %s --dport %d -j ACCEPT\n", target, host, proto, p)
		}
	}
	nat.WriteString("COMMIT\n")
	filter.WriteString("COMMIT\n")
	return nat.String() + filter.String()
}

func parsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("publish: %q is not a port (1-65535)", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("publish: no ports given")
	}
	return out, nil
}
