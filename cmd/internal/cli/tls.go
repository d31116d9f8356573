package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// TLSFiles are the PEM files of the certificate (with its chain, leaf first) and private key a
// server serves HTTPS with. Both empty: plain HTTP.
type TLSFiles struct {
	// Cert is the certificate file: the server's certificate, then any intermediates. Default none.
	Cert string
	// Key is the certificate's private key file (unencrypted PEM). Default none.
	Key string
}

// Flags defines -tls-cert and -tls-key, whose defaults are RECKON_TLS_CERT and RECKON_TLS_KEY.
// Check the pair with Validate after parsing.
func (f *TLSFiles) Flags(e *EnvFlags) {
	e.StringVar(&f.Cert, "tls-cert", "RECKON_TLS_CERT", "",
		"serve HTTPS with this PEM certificate file (its chain after it); needs -tls-key")
	e.StringVar(&f.Key, "tls-key", "RECKON_TLS_KEY", "", "the PEM private key file of -tls-cert")
}

// Enabled reports whether the files are set: HTTPS.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" }

// Validate reports, naming the flags, a certificate without its key or a key without its
// certificate. It does not read the files: Config does.
func (f TLSFiles) Validate() error {
	switch {
	case f.Cert != "" && f.Key == "":
		return errors.New("-tls-cert needs -tls-key (both or neither)")
	case f.Key != "" && f.Cert == "":
		return errors.New("-tls-key needs -tls-cert (both or neither)")
	}
	return nil
}

// Config reads the certificate and key and returns the server's TLS configuration: that
// certificate, TLS 1.2 at least. It returns nil for no files; an error, naming the files, for a
// file that cannot be read or a certificate and key that do not match.
func (f TLSFiles) Config() (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !f.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", f.Cert, f.Key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
