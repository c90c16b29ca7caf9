package cluster

import (
	"context"
	"io"
	"net"
	"os"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Forward serves the API server on a listening socket of the machine's
// loopback (handed over as file descriptor 3 by `kube up`): each connection
// is dialed from inside the control-plane namespace. The root namespace gets
// a listening socket, nothing else (no link, route or rule).
// It returns when ctx ends (SIGTERM from teardown).
func Forward(ctx context.Context, ns, to string) error {
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			var up net.Conn
			// A socket belongs to the namespace it is created in.
			if err := nsutil.Do(ns, func() (err error) { up, err = net.Dial("tcp", to); return }); err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); done <- struct{}{} }()
			go func() { io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}
