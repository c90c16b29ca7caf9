package main

// The hidden kube verbs: what a cluster (kube forward) and vnetlab's image
// (pause, guard, cpu-agent, resolve) run, never typed by people.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

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

// newKubeCPUAgentCmd answers each line on stdin with the node's CPU
// counters (kube run's helper pods on a cluster's nodes); it exits when
// stdin closes.
func newKubeCPUAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "cpu-agent",
		Short:  "Print this node's /proc/stat counters for each line read (kube run's per-node CPU)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return measure.ServeCPUAgent(os.Stdin, os.Stdout) },
	}
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

// newKubeDialCmd dials one TCP address from a pod and prints what became
// of it: connected, refused (a RST: nothing listens, or a reject), or
// dropped (no answer within --timeout). `kube run`'s policies proof runs it
// in a client pod against a port the policies deny (internal/kube/bench/policies.go).
func newKubeDialCmd() *cobra.Command {
	timeout := time.Second
	cmd := &cobra.Command{
		Use:    "dial [--timeout 1s] IP:PORT",
		Short:  "Print connected, refused or dropped for a TCP connection to IP:PORT (kube run's policies proof)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), measure.Dial(args[0], timeout))
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "how long an unanswered connection waits")
	return cmd
}

// newKubeCiliumExecCmd is what each Cilium daemon of a cluster is started
// as: it makes the daemon's mount namespace, then becomes the daemon.
func newKubeCiliumExecCmd() *cobra.Command {
	var run, cg string
	cmd := &cobra.Command{
		Use:    "cilium-exec --run DIR [--cgroup DIR] -- PROGRAM [ARGS...]",
		Short:  "Run a Cilium daemon in a mount namespace of its own (started by kube up --cni cilium)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE:   func(cmd *cobra.Command, args []string) error { return cluster.CiliumExec(run, cg, args) },
	}
	cmd.Flags().StringVar(&run, "run", "", "the daemon's run directory, bound on "+cluster.CiliumRun)
	cmd.Flags().StringVar(&cg, "cgroup", "", "the node's cgroup v2 directory, bound on the agent's cgroup root")
	return cmd
}
