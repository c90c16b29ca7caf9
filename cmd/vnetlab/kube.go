package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/cpupin"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/network"
	"github.com/vnetlab/vnetlab/internal/modes"
)

func init() { extraCommands = append(extraCommands, newKubeCmd) }

func newKubeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "A real multi-node Kubernetes in namespaces on this machine (up, down, ls, kubeconfig, load, image)",
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
	cmd.AddCommand(newKubeUpCmd(), newKubeDownCmd(), newKubeLsCmd(), newKubeKubeconfigCmd(), newKubeLoadCmd(),
		newKubeRunCmd(), newKubeImageCmd(), newKubeCleanCmd(), newKubePauseCmd(), newKubeGuardCmd(), newKubeForwardCmd(), newKubeResolveCmd())
	return cmd
}

func newKubeUpCmd() *cobra.Command {
	spec := cluster.Spec{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local Kubernetes cluster whose control plane and nodes live in namespaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			start := time.Now()
			st, err := cluster.Up(cmd.Context(), spec, stderrf)
			if err != nil {
				return err
			}
			fmt.Printf("cluster %s up in %s: %d nodes Ready, proxy %s, CNI %s, cluster DNS %s, API server %s\n", st.Name, time.Since(start).Round(100*time.Millisecond),
				len(st.Nodes), cluster.Network(st).ProxyText(), cluster.Network(st).CNIText(), st.Facts[cluster.FactDNS], st.Facts[cluster.FactServer])
			fmt.Printf("  kubectl --kubeconfig \"$(vnetlab kube kubeconfig %s)\" get nodes\n", st.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Name, "name", "k", "cluster name")
	cmd.Flags().IntVar(&spec.Nodes, "nodes", 2, "number of nodes")
	cmd.Flags().StringVar(&spec.Proxy, "proxy", network.DefaultProxy, network.ProxyHelp())
	cmd.Flags().BoolVar(&spec.SocketLB, "socket-lb", false, "with --proxy "+network.VnetlabEBPF+": also translate the pods' connect()/sendmsg() at the socket (Cilium's socket LB: no per-packet NAT or conntrack for them); Services without endpoints or with sessionAffinity stay with the tc programs")
	cmd.Flags().StringVar(&spec.CNI, "cni", network.CNIBridge, "CNI plugin wiring the pods: "+network.CNIBridge+" (Debian's bridge + host-local) or "+network.CNIVnetlab+" (vnetlab's modes, docs/cni.md)")
	cmd.Flags().StringVar(&spec.CNIMode, "cni-mode", "", "with --cni vnetlab: the mode wiring each pod, "+strings.Join(modes.AttachModes(), ", ")+" (default "+cluster.DefaultCNIMode+")")
	return cmd
}

func newKubeDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "down CLUSTER [CLUSTER...]",
		Short: "Remove a local cluster: processes, containers, cgroups, mounts, namespaces, state; restore kubelet's sysctls",
		Args:  cobra.MinimumNArgs(1),
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
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := cluster.List()
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cs)
			}
			fmt.Printf("%-12s %-10s %-6s %-9s %-24s %s\n", "NAME", "STATUS", "NODES", "PROXY", "API SERVER", "CREATED")
			for _, c := range cs {
				fmt.Printf("%-12s %-10s %-6d %-9s %-24s %s\n", c.Name, c.Status, len(c.Nodes), cluster.Network(c).ProxyText(), c.Facts[cluster.FactServer], c.Created.Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newKubeKubeconfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig CLUSTER",
		Short: "Print the path of a local cluster's kubeconfig (for kubectl --kubeconfig)",
		Args:  cobra.ExactArgs(1),
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
		Args:  cobra.MinimumNArgs(2),
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

// newKubePauseCmd is the image's entrypoint: the pod sandbox and the
// measuring pods' idle process. As PID 1 it reaps orphans; it exits on
// SIGTERM or SIGINT.
func newKubePauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Wait until stopped, reaping children (the image's entrypoint)",
		Hidden: true,
		Args:   cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sig := make(chan os.Signal, 4)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
			for s := range sig {
				if s != syscall.SIGCHLD {
					return nil
				}
				for {
					var ws unix.WaitStatus
					if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 || err != nil {
						break
					}
				}
			}
			return nil
		},
	}
}

func newKubeForwardCmd() *cobra.Command {
	var ns, to string
	cmd := &cobra.Command{
		Use:    "forward",
		Short:  "Serve a cluster's API server on the listening socket given as fd 3 (started by kube up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return cluster.Forward(cmd.Context(), ns, to) },
	}
	cmd.Flags().StringVar(&ns, "ns", "", "the control plane's namespace")
	cmd.Flags().StringVar(&to, "to", "", "the API server's address in it")
	return cmd
}

// newKubeGuardCmd runs a program and kills it when its own stdin closes: a
// command started through the Kubernetes API's exec keeps running after the
// stream ends, so `kube run` starts every engine process under the guard and
// ends it by closing the stream.
func newKubeGuardCmd() *cobra.Command {
	cpu := -1
	cmd := &cobra.Command{
		Use:    "guard [--cpu N] -- PROGRAM [ARGS...]",
		Short:  "Run a program until stdin closes (kube run's exec wrapper)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := exec.Command(args[0], args[1:]...)
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			start := c.Start
			if cpu >= 0 { // --cpu-affinity for a program without its own option (sockperf)
				start = func() error { return cpupin.StartOn(cpu, c.Start) }
			}
			if err := start(); err != nil {
				return err
			}
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			go func() { _, _ = io.Copy(io.Discard, os.Stdin); _ = c.Process.Kill() }()
			err := <-done
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return exitError{code: ee.ExitCode()}
			}
			return err
		},
	}
	cmd.Flags().IntVar(&cpu, "cpu", -1, "start the program pinned to this CPU (-1: unpinned)")
	return cmd
}

// newKubeResolveCmd resolves a name the way a program in a pod does: the
// stub resolver reads the pod's /etc/resolv.conf (kubelet's clusterDNS,
// search list, ndots), and every query goes over UDP (a test of the
// cluster DNS's UDP path: no silent fallback to TCP). With --server it
// asks that server once for the absolute name (kube up's DNS check, run
// as a process of a node).
func newKubeResolveCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:    "resolve [--server HOST:PORT] NAME",
		Short:  "Print the IPv4 addresses of NAME as /etc/resolv.conf resolves it (or --server answers), over UDP",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var ips []net.IP
			var err error
			if server != "" {
				ips, err = cluster.QueryA(ctx, "", server, args[0])
			} else {
				r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, addr string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "udp", addr)
				}}
				ips, err = r.LookupIP(ctx, "ip4", args[0])
			}
			if err != nil {
				return err
			}
			for _, ip := range ips {
				fmt.Println(ip)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "ask this DNS server (host:port) for the absolute NAME instead of /etc/resolv.conf's")
	return cmd
}
