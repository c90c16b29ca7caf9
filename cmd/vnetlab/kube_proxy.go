package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/proxy"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
)

func init() { extraCommands = append(extraCommands, newKubeProxyCmd, newKubeWhoamiCmd) }

// newKubeProxyCmd is vnetlab's Service proxy for one node, started by
// `kube up --proxy vnetlab-ebpf|vnetlab-sock` in each node's namespace
// instead of kube-proxy (docs/kubernetes-proxy.md).
func newKubeProxyCmd() *cobra.Command {
	var c proxy.Config
	cmd := &cobra.Command{
		Use:   "kube-proxy --kubeconfig F --node NAME --netns NS --plane DIR (--bridge cni0 | --veth-prefix vnl | --programs-by-cni) [--node-ip IP] [--uplink eth0] [--mode vnetlab-ebpf|vnetlab-sock] [--cgroup DIR] [--socket-lb] [--healthz-bind-address IP:PORT] [--metrics-bind-address IP:PORT] [--conntrack-tcp-timeout-close-wait D]",
		Short: "Follow a cluster's Services and EndpointSlices into vnetlab's eBPF Service maps on this node (kube up --proxy vnetlab-ebpf|vnetlab-sock starts it)",
		Example: `  # as kube up --proxy vnetlab-ebpf starts it on node k-node1 of cluster k (bridge CNI)
  sudo vnetlab kube-proxy --kubeconfig /run/vnetlab/labs/k/kubeconfig-internal --node k-node1 --netns vnl-k-node1 --plane k_node1 --bridge cni0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			for flag, v := range map[string]string{"--kubeconfig": c.Kubeconfig, "--node": c.Node, "--netns": c.NetNS, "--plane": c.Plane} {
				if v == "" {
					return fmt.Errorf("%s is empty: kube-proxy needs --kubeconfig, --node, --netns and --plane", flag)
				}
			}
			if c.Mode != proxy.ModeEBPF && c.Mode != proxy.ModeSock {
				return fmt.Errorf("--mode %q: use %s (tc programs on the pods' veths) or %s (socket programs on --cgroup)", c.Mode, proxy.ModeEBPF, proxy.ModeSock)
			}
			if c.Mode == proxy.ModeSock && c.Cgroup == "" {
				return fmt.Errorf("--mode %s needs --cgroup: the node's cgroup v2 directory, which holds its pods", proxy.ModeSock)
			}
			if c.SocketLB && (c.Mode != proxy.ModeEBPF || c.Cgroup == "") {
				return fmt.Errorf("--socket-lb needs --mode %s and --cgroup (with %s every socket is translated already)", proxy.ModeEBPF, proxy.ModeSock)
			}
			if _, err := c.PodLinks(); err != nil {
				return err
			}
			if c.TCPCloseWaitTimeout != 0 && c.TCPCloseWaitTimeout < time.Second {
				return fmt.Errorf("--conntrack-tcp-timeout-close-wait %s: give whole seconds (the sysctl's unit), or 0 to leave the node's value", c.TCPCloseWaitTimeout)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			c.Logf = func(f string, a ...any) {
				fmt.Fprintf(os.Stderr, "%s "+f+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...)
			}
			return proxy.Run(ctx, c)
		},
	}
	cmd.Flags().StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster's API server")
	cmd.Flags().StringVar(&c.Node, "node", "", "this node's Kubernetes name (for internalTrafficPolicy Local)")
	cmd.Flags().StringVar(&c.NetNS, "netns", "", "this node's network namespace (a name under /run/netns); run the proxy inside it")
	cmd.Flags().StringVar(&c.Plane, "plane", "", "the node's pin directory name under /sys/fs/bpf/vnetlab")
	cmd.Flags().StringVar(&c.Bridge, "bridge", "", "the CNI's bridge, whose ports (the pods' veths) get the programs (Debian's bridge plugin: cni0)")
	cmd.Flags().StringVar(&c.VethPrefix, "veth-prefix", "", "the pods' node-side veths are those named with this prefix (vnetlab's CNI: vnl)")
	cmd.Flags().BoolVar(&c.ByCNI, "programs-by-cni", false, "the CNI attaches the programs itself (vnetlab's veth-ebpf): only fill the Service maps of --plane")
	cmd.Flags().StringVar(&c.NodeIP, "node-ip", "", "the node's addresses NodePorts answer on, one per family, comma-separated as kubelet's: IPv4[,IPv6] (default: the Node's InternalIPs)")
	cmd.Flags().StringVar(&c.Uplink, "uplink", "eth0", "the node's interface towards other nodes and clients: gets the NodePort programs (\"\": none)")
	cmd.Flags().StringVar(&c.Mode, "mode", proxy.ModeEBPF, "data plane: "+proxy.ModeEBPF+" (tc programs on the pods' veths) or "+proxy.ModeSock+" (socket programs on --cgroup)")
	cmd.Flags().StringVar(&c.Cgroup, "cgroup", "", "the node's cgroup v2 directory (its pods are below it): socket programs go there, for every socket ("+proxy.ModeSock+") or the node's own network namespace's ("+proxy.ModeEBPF+")")
	cmd.Flags().StringVar(&c.HealthzAddr, "healthz-bind-address", proxy.DefaultHealthzAddr, "IP:port of the proxy health server (/healthz, /livez), as kube-proxy's (\"\": none)")
	cmd.Flags().StringVar(&c.MetricsAddr, "metrics-bind-address", proxy.DefaultMetricsAddr, "IP:port of the status server (/proxyMode, /healthz, and /metrics: kube-proxy's Prometheus metrics), as kube-proxy's (\"\": none)")
	cmd.Flags().DurationVar(&c.TCPCloseWaitTimeout, "conntrack-tcp-timeout-close-wait", proxy.DefaultTCPCloseWaitTimeout, "set the node namespace's conntrack timeout for TCP connections in CLOSE_WAIT to this, at start, as kube-proxy's flag (0: leave it)")
	cmd.Flags().BoolVar(&c.SocketLB, "socket-lb", false, "with --mode "+proxy.ModeEBPF+": the socket programs on --cgroup translate the pods' connect()/sendmsg() too (Cilium's socket LB: no per-packet NAT for them); Services without endpoints or with sessionAffinity stay with the tc programs")
	return cmd
}

// newKubeWhoamiCmd answers every TCP connection and UDP datagram with the
// host name (a pod's name): the tests' backends, which say who served.
func newKubeWhoamiCmd() *cobra.Command {
	var tcp, udp, tcpPeer, udpPort, tcpKeep []int
	var name string
	cmd := &cobra.Command{
		Use:    "whoami [--name NAME] [--tcp PORT]... [--udp PORT]... [--tcp-peer PORT]... [--udp-port PORT]... [--tcp-keep PORT]...",
		Short:  "Answer TCP connections and UDP datagrams with the host name (test backends)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host := name
			if host == "" {
				host, _ = os.Hostname()
			}
			msg := []byte(host + "\n")
			errc := make(chan error, len(tcp)+len(udp)+len(tcpPeer)+len(udpPort)+len(tcpKeep))
			for _, p := range tcpKeep {
				ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
				if err != nil {
					return err
				}
				go func() { errc <- converge.ServeKeep(ln, host) }()
			}
			for i, p := range append(tcp, tcpPeer...) {
				peer := i >= len(tcp) // also say who asked: NodePort tests check the client's address
				// "tcp" and "udp": both families, for dual-stack and IPv6 pods.
				ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
				if err != nil {
					return err
				}
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							errc <- err
							return
						}
						if peer {
							_, _ = c.Write([]byte(host + " " + c.RemoteAddr().String() + "\n"))
						} else {
							_, _ = c.Write(msg)
						}
						c.Close()
					}
				}()
			}
			for i, p := range append(udp, udpPort...) {
				pc, err := net.ListenPacket("udp", ":"+strconv.Itoa(p))
				if err != nil {
					return err
				}
				msg := msg
				if i >= len(udp) { // also say which port: target port tests
					msg = []byte(host + " " + strconv.Itoa(p) + "\n")
				}
				go func() {
					buf := make([]byte, 2048)
					for {
						_, from, err := pc.ReadFrom(buf)
						if err != nil {
							errc <- err
							return
						}
						_, _ = pc.WriteTo(msg, from)
					}
				}()
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			select {
			case <-ctx.Done():
				return nil
			case err := <-errc:
				return err
			}
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "answer with this name (default: the host name, a pod's name; a lab's pods share the machine's)")
	cmd.Flags().IntSliceVar(&tcp, "tcp", nil, "TCP port to answer on (repeatable)")
	cmd.Flags().IntSliceVar(&udp, "udp", nil, "UDP port to answer on (repeatable)")
	cmd.Flags().IntSliceVar(&tcpPeer, "tcp-peer", nil, "TCP port to answer on with the host name and the client's address:port (repeatable)")
	cmd.Flags().IntSliceVar(&udpPort, "udp-port", nil, "UDP port to answer on with the host name and that port (repeatable)")
	cmd.Flags().IntSliceVar(&tcpKeep, "tcp-keep", nil, "TCP port to answer every line of a connection on with the host name, the connection kept (kube converge's kept connections; repeatable)")
	return cmd
}
