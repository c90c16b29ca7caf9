package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/measure/rrbench"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// rr-server and rr-client are the built-in rr engine's two halves; the rr
// driver (internal/measure/engine/rr.go) starts them inside pods from this binary.
func init() { extraCommands = append(extraCommands, newRRServerCmd, newRRClientCmd) }

func newRRServerCmd() *cobra.Command {
	var (
		proto, bind            string
		port, size, cpu, flows int
		open                   bool
	)
	cmd := &cobra.Command{
		Use:    "rr-server --proto tcp|udp [--port 7001] [--size 1]",
		Short:  "Serve the built-in request/response benchmark (used inside pods by the rr engine)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pinSelf(cpu); err != nil {
				return err
			}
			srv, err := rrbench.Listen(rrbench.ServerConfig{Proto: proto, Addr: net.JoinHostPort(bind, strconv.Itoa(port)), Size: size, Flows: flows, Open: open})
			if err != nil {
				return err
			}
			// The driver waits for this line, as it waits for iperf3's "Server listening".
			fmt.Printf("%s %s %s\n", rrbench.ReadyPrefix, proto, net.JoinHostPort(bind, strconv.Itoa(srv.Port())))
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			go func() { <-sig; srv.Close() }()
			return srv.Serve()
		},
	}
	f := cmd.Flags()
	f.StringVar(&proto, "proto", "tcp", "tcp or udp")
	f.StringVar(&bind, "bind", "0.0.0.0", "address to listen on")
	f.IntVar(&port, "port", 7001, "port to listen on (0 = any)")
	f.IntVar(&size, "size", 1, "request and response size in bytes")
	f.IntVar(&flows, "flows", 1, "TCP: clients connect this many flows at once (each served concurrently)")
	f.BoolVar(&open, "open-loop", false, "the client runs an open loop (--rate): serve TCP from one event loop over every connection (tcp_crr: many at once)")
	f.IntVar(&cpu, "cpu", -1, "pin every thread to this CPU (vnetlab run --cpu-affinity; -1: unpinned)")
	return cmd
}

// pinSelf pins the whole process to cpu (-1: leave it to the scheduler).
func pinSelf(cpu int) error {
	if cpu < 0 {
		return nil
	}
	return cpupin.PinSelf(cpu)
}

func newRRClientCmd() *cobra.Command {
	var (
		cfg    rrbench.ClientConfig
		output string
		cpu    int
	)
	cmd := &cobra.Command{
		Use:   "rr-client --proto tcp|udp --addr IP:PORT [--mode rr|crr] [--duration 2s] [--size 1] [-o json|text]",
		Short: "Run the built-in request/response benchmark against an rr-server",
		Long: `rr: one connection, --size bytes each way per transaction (netperf TCP_RR/UDP_RR).
crr: a new TCP connection per transaction, closed with RST (SO_LINGER 0) so no
TIME_WAIT piles up across samples (netperf TCP_CRR closes with FIN).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "json" && output != "text" {
				return fmt.Errorf("-o %q: use json or text", output)
			}
			if err := pinSelf(cpu); err != nil {
				return err
			}
			rep, err := rrbench.Run(cfg)
			if err != nil {
				return err
			}
			if output == "text" {
				fmt.Print(rep.Text())
				return nil
			}
			return json.NewEncoder(os.Stdout).Encode(rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Proto, "proto", "tcp", "tcp or udp")
	f.StringVar(&cfg.Mode, "mode", "rr", "rr (one connection) or crr (connect, request, response, close)")
	f.StringVar(&cfg.Addr, "addr", "", "server IP:PORT")
	f.IntVar(&cfg.Size, "size", 1, "request and response size in bytes")
	f.DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long to run")
	f.Float64Var(&cfg.Rate, "rate", 0, "open loop: send this many requests (crr: connections) per second in all, on a fixed schedule, latency from each intended send time; 0: closed loop")
	f.DurationVar(&cfg.Timeout, "timeout", rrbench.DefaultUDPTimeout, "UDP: wait this long for a response, then count the request lost")
	f.IntVar(&cfg.Flows, "flows", 1, "run this many flows at once, each its own connection (the server needs --flows too)")
	f.StringVarP(&output, "output", "o", "text", "json or text")
	f.IntVar(&cpu, "cpu", -1, "pin every thread to this CPU (vnetlab run --cpu-affinity; -1: unpinned)")
	_ = cmd.MarkFlagRequired("addr")
	return cmd
}
