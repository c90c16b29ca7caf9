package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

func init() { extraCommands = append(extraCommands, newKubeCmd) }

func newKubeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "A real multi-node Kubernetes in namespaces on this machine (up, down, ls, set-proxy, kubeconfig, load, image, conformance)",
		Long: `vnetlab kube runs a real Kubernetes on this machine, as kind does, without a
container registry: etcd, kube-apiserver, kube-controller-manager and kube-scheduler in a
control-plane namespace; each node (containerd + runc, kubelet, kube-proxy, CNI bridge +
host-local) in its own network namespace; CoreDNS serves cluster DNS as the kube-dns
Service. The Kubernetes binaries and CoreDNS are built once from the Go module proxy and
cached under ~/.cache/vnetlab/kube (the first time takes about 12 minutes on 2 cores). The root namespace keeps its links, routes and firewall; the API
server is published on a 127.0.0.1 port.

  vnetlab kube up --name k --nodes 2
  kubectl --kubeconfig "$(vnetlab kube kubeconfig k)" get nodes -o wide
  vnetlab kube down k`,
	}
	cmd.AddCommand(newKubeUpCmd(), newKubeDownCmd(), newKubeLsCmd(), newKubeBuildCmd(), newKubeKubeconfigCmd(), newKubeLoadCmd(),
		newKubeRunCmd(), newKubeImageCmd(), newKubeCleanCmd(), newKubeConformanceCmd(), newKubePauseCmd(), newKubeGuardCmd(), newKubeCPUAgentCmd(), newKubeForwardCmd(), newKubeResolveCmd(), newKubeDialCmd(), newKubeCiliumExecCmd(),
		newKubeConvergeCmd(), newKubeProbeCmd(), newKubeConvergeReportCmd(), newKubeSetProxyCmd(), newKubeReadinessCmd(), newKubeHelloCmd(), newKubeHelloListenCmd())
	return cmd
}

func newKubeUpCmd() *cobra.Command {
	spec := cluster.Spec{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local Kubernetes cluster whose control plane and nodes live in namespaces",
		Example: `  sudo vnetlab kube up
  sudo vnetlab kube up --name k3 --nodes 3 --proxy nftables
  sudo vnetlab kube up --name e --cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-ebpf --socket-lb
  sudo vnetlab kube up --name f --cni flannel --flannel-backend host-gw
  sudo vnetlab kube up --name d --cni vnetlab --cni-mode veth-routed --ip-family dual`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			start := time.Now()
			st, err := cluster.Up(cmd.Context(), spec, stderrf)
			if err != nil {
				return err
			}
			n := cluster.Network(st)
			fmt.Printf("cluster %s up in %s: %d nodes Ready, %s, proxy %s, CNI %s, NetworkPolicy %s, cluster DNS %s, API server %s\n", st.Name, time.Since(start).Round(100*time.Millisecond),
				len(st.Nodes), cluster.Family(st), n.ProxyText(), n.CNIText(), n.Policy, st.Facts[cluster.FactDNS], st.Facts[cluster.FactServer])
			fmt.Printf("  kubectl --kubeconfig \"$(vnetlab kube kubeconfig %s)\" get nodes\n", st.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Name, "name", "k", "cluster name")
	cmd.Flags().IntVar(&spec.Nodes, "nodes", 2, "number of nodes")
	cmd.Flags().IntVar(&spec.Zones, "zones", 0, "label the nodes with this many zones, round robin (topology.kubernetes.io/zone zone-1..N, region "+cluster.Region+"): topology-aware routing needs them; 0: none")
	cmd.Flags().StringVar(&spec.Proxy, "proxy", clusternet.DefaultProxy, clusternet.ProxyHelp())
	cmd.Flags().BoolVar(&spec.SocketLB, "socket-lb", false, "with --proxy "+clusternet.VnetlabEBPF+": also translate the pods' connect()/sendmsg() at the socket (Cilium's socket LB: no per-packet NAT or conntrack for them); Services without endpoints or with sessionAffinity stay with the tc programs")
	cmd.Flags().StringVar(&spec.CNI, "cni", clusternet.CNIBridge, "CNI plugin wiring the pods: "+clusternet.CNIBridge+" (Debian's bridge + host-local), "+clusternet.CNIVnetlab+" (vnetlab's modes, docs/cni.md), "+clusternet.CNIFlannel+" (flanneld built from its Go module, as a DaemonSet; docs/kubernetes-vs-lab.md) or "+clusternet.CNICilium+" (Cilium built from its Go module, kube build --only cilium: its agent a daemon of every node, native routing, beside kube-proxy; needs clang-19; docs/kubernetes.md)")
	cmd.Flags().Var(&spec.Family, "ip-family", "the cluster's IP family: ipv4, ipv6 or dual (dual-stack Service and pod ranges, node addresses and routes; IPv4 primary); with any --proxy, and --cni "+clusternet.CNIBridge+" or --cni "+clusternet.CNIVnetlab+" with dual and --cni-mode "+strings.Join(cluster.CNIModes6(), " or "))
	cmd.Flags().StringVar(&spec.CNIMode, "cni-mode", "", "with --cni vnetlab: the mode wiring each pod, "+strings.Join(modes.AttachModes(), ", ")+" (default "+cluster.DefaultCNIMode+")")
	cmd.Flags().StringVar(&spec.NetworkPolicy, "network-policy", "", clusternet.EnforcerHelp()+" (default "+clusternet.PolicyVnetlab+" with --cni "+clusternet.CNIVnetlab+" in a mode it serves, else "+clusternet.PolicyNone+")")
	cmd.Flags().StringVar(&spec.FlannelBackend, "flannel-backend", "", "with --cni flannel: flannel's backend, "+strings.Join(clusternet.FlannelBackends, " or ")+" (default "+clusternet.FlannelBackends[0]+")")
	return cmd
}

func newKubeDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "down CLUSTER [CLUSTER...]",
		Short:   "Remove a local cluster: processes, containers, cgroups, mounts, namespaces, state; restore kubelet's sysctls",
		Example: `  sudo vnetlab kube down k k3 e`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			for _, n := range args {
				start := time.Now()
				if err := cluster.Down(n, nil); err != nil {
					return err
				}
				fmt.Printf("cluster %s removed in %s\n", n, time.Since(start).Round(100*time.Millisecond))
			}
			return nil
		},
	}
}

func newKubeLsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List local clusters",
		Example: `  vnetlab kube ls
  vnetlab kube ls -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := cluster.List()
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cs)
			}
			fmt.Printf("%-12s %-10s %-6s %-6s %-9s %-11s %-24s %s\n", "NAME", "STATUS", "NODES", "FAMILY", "PROXY", "NETPOL", "API SERVER", "CREATED")
			for _, c := range cs {
				n := cluster.Network(c)
				fmt.Printf("%-12s %-10s %-6d %-6s %-9s %-11s %-24s %s\n", c.Name, c.Status, len(c.Nodes), cluster.Family(c), n.ProxyText(), n.Policy, c.Facts[cluster.FactServer], c.Created.Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newKubeKubeconfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "kubeconfig CLUSTER",
		Short:   "Print the path of a local cluster's kubeconfig (for kubectl --kubeconfig)",
		Example: `  kubectl --kubeconfig "$(vnetlab kube kubeconfig k)" get nodes`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := cluster.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Println(st.Facts[cluster.FactKubeconfig])
			return nil
		},
	}
}

func newKubeLoadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "load CLUSTER IMAGE.tar...",
		Short: "Import image archives (docker or OCI tarballs) into every node of a local cluster",
		Example: `  sudo vnetlab kube load k vnetlab.tar
  docker save nginx:1.27 -o nginx.tar && sudo vnetlab kube load k nginx.tar`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if err := cluster.LoadImages(cmd.Context(), args[0], args[1:]); err != nil {
				return err
			}
			fmt.Printf("loaded %d archives into cluster %s\n", len(args)-1, args[0])
			return nil
		},
	}
}

func newKubeImageCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "image -o FILE.tar",
		Short: "Write vnetlab's measuring image (vnetlab, iperf3, sockperf and their libraries) as a tarball",
		Example: `  vnetlab kube image -o vnetlab.tar
  vnetlab kube image -o vnetlab.tar && kind load image-archive vnetlab.tar`,
		Long: `Write vnetlab's image for clusters without a registry: load it with
"vnetlab kube load CLUSTER FILE.tar", "kind load image-archive FILE.tar" or
"ctr -n k8s.io images import FILE.tar" on each node. It prints the image reference.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("say where to write the image: -o FILE.tar")
			}
			self, err := engine.SelfBinary()
			if err != nil {
				return err
			}
			img, err := image.Build(self)
			if err != nil {
				return err
			}
			if err := img.Write(out); err != nil {
				return err
			}
			fmt.Println(img.Ref)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the tarball to write")
	return cmd
}
