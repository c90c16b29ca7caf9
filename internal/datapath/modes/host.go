package modes

import "fmt"

// host: client and server both in the node, over loopback. The ceiling of
// every same-host path (seed 000's "loopback 49.2 Gbit/s", seed 004's
// physical->physical baseline).
func init() {
	Register(Mode{
		Name:      Host,
		Seeds:     []Seed{SeedInterfaces, SeedLatency, SeedBridgeOVS, SeedDocker},
		Summary:   "client and server in the node over loopback: the same-host ceiling (seeds 000, 004)",
		Build:     buildHost,
		Podless:   true,
		CrossHost: true,
		IPv6:      true,
	})
}

func buildHost(env *Env) error {
	if len(env.Nodes) > 1 {
		// Node-to-node over the underlay: the cross-host baseline (seed 003's em1-em1).
		a, b := env.Nodes[0], env.Nodes[1]
		env.Paths = map[string]Endpoint{"pod": {ServerNS: a.Name, ClientNS: b.Name, Target: a.UnderlayIP.String(), Target6: ipText(a.UnderlayIP6),
			Note: fmt.Sprintf("%s -> %s over the underlay (no pods)", b.Node, a.Node)}}
		return nil
	}
	env.Paths = map[string]Endpoint{
		"pod": {ServerNS: env.Node.Name, ClientNS: env.Node.Name, Target: "127.0.0.1", Target6: hostLoopback6(env),
			Note: "node -> node over loopback (no pods)"},
		// Seed 004's "cross-host physical -> Docker host mode" (docker run
		// --net=host): the server shares the node's stack, so another host
		// reaches it at node IP:port, the path docker-nat's "published" adds
		// DNAT and a bridge to.
		"published": {ServerNS: env.Node.Name, ClientNS: env.Ext.Name, Target: env.NodeIP.String(), Target6: ipText(env.Nodes[0].IP6),
			Note: "another host (ext) -> node IP:port, server in the node (docker --net=host; seed 004: 9.40 Gbit/s)"},
	}
	return nil
}

// hostLoopback6 is the IPv6 loopback in a lab with IPv6 ("" without).
func hostLoopback6(env *Env) string {
	if !env.HasIPv6() {
		return ""
	}
	return "::1"
}
