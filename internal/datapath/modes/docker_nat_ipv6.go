package modes

// dockerNAT6 is docker-nat's IPv6 half (dockerd with ip6tables: true): the
// same tables through ip6tables (dockerNATRules), IPv6 forwarding, and
// bridged IPv6 through ip6tables as bridged IPv4 goes through iptables.
func dockerNAT6(env *Env, server *Pod, ports []int) error {
	if err := bridgeNode6(env.Node.Name, true); err != nil {
		return err
	}
	return Ip6tablesRestore(env.Node.Name, dockerNATRules(env.PodNet6, server.IP6, ports))
}
