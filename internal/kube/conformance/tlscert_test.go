package conformance

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
)

// porter's pair loads as a TLS server's (as porter loads it) and names
// 127.0.0.1 and ::1, as upstream's localhost.crt does.
func TestPorterTLS(t *testing.T) {
	cert, key, err := writePorterTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback} {
		if err := c.VerifyHostname(ip.String()); err != nil {
			t.Errorf("%s: %v", ip, err)
		}
	}
}
