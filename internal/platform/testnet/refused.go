package testnet

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"time"
)

// RefusedAfter tries addr from inside enter (a namespace switch such as
// nsutil.Do): a TCP network connects, a UDP one sends and reads on a
// connected socket. It returns how long until ECONNREFUSED, the answer
// kube-proxy's REJECT gives, or an error saying what happened instead
// within 3 s (connected, answered, timed out).
func RefusedAfter(enter func(func() error) error, network, addr string) (time.Duration, error) {
	var took time.Duration
	err := enter(func() error {
		start := time.Now()
		c, err := net.DialTimeout(network, addr, 3*time.Second)
		if strings.HasPrefix(network, "tcp") {
			took = time.Since(start)
			if err == nil {
				c.Close()
				return errors.New("connected")
			}
			return err
		}
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 64)
		for {
			if _, err = c.Write([]byte("anyone?")); err == nil {
				_, err = c.Read(buf)
			}
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			took = time.Since(start)
			if err == nil {
				return errors.New("answered")
			}
			return err
		}
	})
	if errors.Is(err, syscall.ECONNREFUSED) {
		return took, nil
	}
	return took, err
}
