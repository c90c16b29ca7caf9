package main

import (
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// newKubeSetProxyCmd switches a local cluster's Service proxy in place.
func newKubeSetProxyCmd() *cobra.Command {
	var name, proxy string
	var socketLB bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "set-proxy --cluster NAME --proxy PROXY [--socket-lb] [--timeout D]",
		Short: "Switch a running local cluster's Service proxy in place, keeping its pods and Services",
		Long: `Stops the cluster's node proxies, cleans every proxy's state off every node, starts the new
proxy as kube up starts it and waits until each node's first sync is done: the Services made
once (kube converge --keep-extra) are measured under every proxy without making them again.

What is cleaned on each node, whatever the cluster ran (a switch that was killed may have left
any mix): kube-proxy's rules (kube-proxy --cleanup: the KUBE-* chains of both families, the
tables ip and ip6 kube-proxy) and route_localnet; vnetlab's socket programs (their cgroup
links and maps), its Service maps (emptied), its NodePort programs on eth0, the programs it
put on the pods (another CNI than veth-ebpf, whose plane then goes) or, on veth-ebpf, the
plane's conntrack, affinity and via-stack flows (the CNI's programs stay); last the node's
conntrack. Established connections through a ClusterIP reset once.

The new proxy's facts (proxy, socket_lb, proxy_since) are written before it starts: kube ls
and the results name it. It prints each node's first sync (the time to program every
Service) and the proxy's CPU and memory by then. --timeout bounds that wait (default: 2
minutes and 1 more per 5,000 Services).

A cluster in use (a kube converge runs on it, or another set-proxy or down) is refused. The
cluster is marked switching-proxy until the switch completes: kube converge and kube run
refuse it meanwhile, and a switch that failed or was killed is completed by running the same
set-proxy again (or the cluster removed with kube down). The CNI and NetworkPolicy enforcer
stay kube up's: a proxy they cannot run with is refused as kube up refuses it (kube-proxy on
veth-ebpf needs --network-policy none).`,
		Example: `  vnetlab kube up --name sw --cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-ebpf --network-policy none
  vnetlab kube converge --cluster sw --extra-services 10000 --keep-extra -o ebpf-10k.json
  vnetlab kube set-proxy --cluster sw --proxy nftables
  vnetlab kube converge --cluster sw --extra-services 10000 --keep-extra -o nft-10k.json
  vnetlab kube set-proxy --cluster sw --proxy vnetlab-ebpf --socket-lb`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || proxy == "" {
				return fmt.Errorf("give the cluster and the new proxy: --cluster NAME --proxy PROXY (%s)", clusternet.ProxyHelp())
			}
			if err := requireRoot(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			sw, err := cluster.SetProxy(ctx, name, proxy, socketLB, timeout, stderrf)
			if err != nil {
				return err
			}
			if sw.Unchanged {
				fmt.Printf("cluster %s: proxy %s already: nothing switched\n", name, sw.To)
				return nil
			}
			fmt.Printf("cluster %s: proxy %s -> %s in %s (%d Services)\n", name, sw.From, sw.To, sw.Took.Round(100*time.Millisecond), sw.Services)
			for _, n := range sw.Nodes {
				fmt.Printf("  %s: first sync %s after the start; proxy pid %d, CPU %.2f s, RSS %d MB (peak %d MB)\n", n.Node,
					n.FirstSync.Round(time.Millisecond), n.PID, n.CPU.Seconds(), n.RSS>>20, n.PeakRSS>>20)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "cluster", "", "the local cluster (kube ls)")
	f.StringVar(&proxy, "proxy", "", clusternet.ProxyHelp())
	f.BoolVar(&socketLB, "socket-lb", false, "with --proxy "+clusternet.VnetlabEBPF+": its socket LB too (as kube up --socket-lb)")
	f.DurationVar(&timeout, "timeout", 0, "how long the new proxies may take to sync on every node (0: sized by the Services present)")
	return cmd
}
