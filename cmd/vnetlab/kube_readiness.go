package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/measure/readiness"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// newKubeReadinessCmd measures pod network readiness.
func newKubeReadinessCmd() *cobra.Command {
	spec := bench.DefaultReadinessSpec()
	var cf clusterFlags
	var output string
	cmd := &cobra.Command{
		Use:   "readiness (--cluster NAME[,NAME...] | --kubeconfig PATH [--context C]) [--pods 1,50] [--repeat 6] [-o readiness.json]",
		Short: "Measure pod network readiness: from a pod's creation to its first packet on the pod network, for one pod and for many created at once",
		Long: `A listener pod is made Ready first. Then, in each of --repeat rounds, a burst of each
--pods size is created at once, the pods spread over the Ready nodes in turn (each pod's node
is named in it, so the scheduler is not measured: the kubelet, the container runtime and the
CNI are). Each new pod's container sends its name over UDP to the listener every --interval
until one datagram is answered. A pod's time is from just before its creation call to the
listener reading its first datagram; a burst's last-pod time is from its first creation to
the last pod's first datagram. The round's pods are then deleted, and gone, before the next
burst. One unmeasured pod per node comes first. The table gives each burst size's p50, p90
and p99 over every pod of every round (bootstrap 95% CIs), the largest, and the median
last-pod time. With several clusters (--cluster a,b), each round runs each burst size in
every cluster in turn (the order turned by one each round), and each cluster after the
first is set beside the first: the ratio of the rounds' median times, paired by round, with
its 95% interval and the signed-rank verdict (6 rounds or more). The listener and the driver must share a clock: on a local cluster they do;
on another, the nodes and this machine must be in NTP sync (the error adds to every time).
Everything created is deleted at the end, also on Ctrl-C.`,
		Example: `  vnetlab kube readiness --cluster k
  vnetlab kube readiness --cluster k --pods 1,10,50 --repeat 10 -o k-ready.json
  vnetlab kube readiness --cluster bridge,flannel,vnetlab --repeat 8
  vnetlab kube readiness --kubeconfig ~/.kube/config --pods 1 --repeat 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Local, spec.Kubeconfig, spec.Context = nil, cf.kubeconfig, cf.context
			if cf.cluster != "" {
				spec.Local = strings.Split(cf.cluster, ",")
			}
			if err := spec.Check(); err != nil {
				return err
			}
			return runMeasured(cmd, output, func(ctx context.Context, say func(string, ...any)) (*results.ReadinessRun, error) {
				return bench.MeasureReadiness(ctx, spec, say)
			}, report.PrintReadiness, results.WriteReadiness)
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	f.Lookup("cluster").Usage = "local clusters made by vnetlab kube up, comma-separated: measured in the same rounds, each burst size in each cluster in turn, and compared with the first round by round"
	f.IntSliceVar(&spec.Bursts, "pods", spec.Bursts, "burst sizes: how many pods are created at once, each size once per round")
	f.IntVar(&spec.Repeat, "repeat", spec.Repeat, "rounds")
	f.DurationVar(&spec.Timeout, "timeout", spec.Timeout, "how long a burst's pods may take to send their first packet")
	f.DurationVar(&spec.Every, "interval", spec.Every, "how often a new pod sends until answered: the times' resolution")
	f.StringVar(&spec.Image, "image", "", "image with vnetlab in /usr/bin (default: vnetlab's own, loaded into a local cluster)")
	f.StringVarP(&output, "output", "o", "", "write every pod's time and the table's rows as JSON here")
	return cmd
}

// newKubeHelloCmd is a measured pod's command: its first packet, then idle.
func newKubeHelloCmd() *cobra.Command {
	var to, name string
	every := time.Millisecond
	cmd := &cobra.Command{
		Use:    "hello --to IP:PORT --name NAME [--interval 1ms]",
		Short:  "Send NAME over UDP every interval until answered, then wait until stopped (kube readiness's pods run it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ap, err := netip.ParseAddrPort(to)
			if err != nil {
				return fmt.Errorf("--to %q: want IP:PORT (%v)", to, err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			err = readiness.Hello(ctx, ap, name, every)
			stop()
			if err != nil {
				return err
			}
			return newKubePauseCmd().RunE(cmd, nil)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the listener's IP:PORT")
	cmd.Flags().StringVar(&name, "name", "", "what to send: the pod's name")
	cmd.Flags().DurationVar(&every, "interval", every, "between datagrams")
	return cmd
}

// newKubeHelloListenCmd is kube readiness's listener, run in a pod.
func newKubeHelloListenCmd() *cobra.Command {
	port := readiness.Port
	cmd := &cobra.Command{
		Use:    "hello-listen [--port N]",
		Short:  "Answer every UDP datagram and print each name's first one as a JSON line, after a line saying where it listens (kube readiness runs it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := net.ListenUDP("udp", &net.UDPAddr{Port: port})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			if err := enc.Encode(readiness.Line{Listening: conn.LocalAddr().String()}); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			var werr error
			err = readiness.Listen(ctx, conn, func(a readiness.Arrival) {
				if werr == nil {
					werr = enc.Encode(readiness.Line{Arrival: &a})
				}
			})
			if err == nil {
				err = werr
			}
			return err
		},
	}
	cmd.Flags().IntVar(&port, "port", port, "UDP port")
	return cmd
}
