package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki writes the cluster's CA, the API server's serving certificate, the
// service-account signing key and a static admin token: a local test
// cluster, so every component authenticates with that token.
type pki struct {
	dir   string
	token string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func writePKI(dir string, sans []net.IP) (pki, error) {
	p := pki{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vnetlab-kube-ca"},
		NotBefore: now, NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now, NotAfter: now.AddDate(10, 0, 0), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: sans,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return p, err
	}
	p.token = hex.EncodeToString(tok)
	srvKeyDER, _ := x509.MarshalECPrivateKey(srvKey)
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	files := []struct {
		name string
		data []byte
	}{
		{"ca.crt", pemBlock("CERTIFICATE", caDER)},
		{"apiserver.crt", pemBlock("CERTIFICATE", srvDER)},
		{"apiserver.key", pemBlock("EC PRIVATE KEY", srvKeyDER)},
		{"sa.key", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))},
		{"sa.pub", pemBlock("PUBLIC KEY", saPub)},
		{"tokens.csv", []byte(p.token + ",admin,admin,system:masters\n")},
	}
	for _, f := range files {
		if err := os.WriteFile(p.path(f.name), f.data, 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
