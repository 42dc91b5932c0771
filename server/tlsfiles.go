package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// tlsFiles serves the server certificate and the client CA pool from files,
// reloading them (at most once a second, when a file's modification time or
// size changes) so that renewed certificates take effect without a restart.
// A file that fails to load leaves the previous one in force.
type tlsFiles struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger
	reloaded                  func(error) // the result of every reload after the first load

	mu        sync.Mutex
	checked   time.Time
	stamp     string
	cert      *tls.Certificate
	clientCAs *x509.CertPool
}

func newTLSFiles(certFile, keyFile, caFile string, log *slog.Logger, reloaded func(error)) (*tlsFiles, error) {
	f := &tlsFiles{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log, reloaded: reloaded}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// stampOf names the current versions of the files.
func (f *tlsFiles) stampOf() string { return fileStamp(f.certFile, f.keyFile, f.caFile) }

// fileStamp names the current versions of files (their modification times
// and sizes): it changes when one of them does. Empty paths and missing
// files add nothing.
func fileStamp(paths ...string) string {
	s := ""
	for _, p := range paths {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", p, st.ModTime().UnixNano(), st.Size())
		}
	}
	return s
}

func (f *tlsFiles) reload() error {
	stamp := f.stampOf()
	if err := secretfile.Check(f.keyFile); err != nil {
		return fmt.Errorf("tls key: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate: %v", err)
	}
	var pool *x509.CertPool
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return fmt.Errorf("tls client CA: %v", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("tls client CA: no PEM certificate in " + f.caFile)
		}
	}
	f.cert, f.clientCAs, f.stamp = &cert, pool, stamp
	return nil
}

// current reloads when due and returns the certificate and client CAs.
func (f *tlsFiles) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= time.Second {
		f.checked = time.Now()
		if stamp := f.stampOf(); stamp != f.stamp {
			err := f.reload()
			f.reloaded(err)
			if err != nil {
				f.log.Error("tls files changed but do not load; keeping the previous ones", "cause", err.Error())
				f.stamp = stamp // do not retry until they change again
			} else {
				f.log.Info("tls files reloaded")
			}
		}
	}
	return f.cert, f.clientCAs
}

// config returns a server TLS configuration that asks for (but does not
// itself verify) client certificates: the authenticator verifies them, so
// that a bad certificate gets UNAUTHENTICATED rather than a failed handshake.
func (f *tlsFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, _ := f.current()
			return c, nil
		},
	}
}

// pool returns the current client CA pool, or nil without a client CA file.
func (f *tlsFiles) pool() *x509.CertPool {
	_, p := f.current()
	return p
}

// notAfter returns when the serving certificate expires.
func (f *tlsFiles) notAfter() time.Time {
	c, _ := f.current()
	if c == nil || c.Leaf == nil {
		return time.Time{}
	}
	return c.Leaf.NotAfter
}
