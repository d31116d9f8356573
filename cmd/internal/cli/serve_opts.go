package cli

import (
	"errors"
	"fmt"
	"time"
)

// ServeOpts configures Serve and ServeOn. Nil, or a zero field, takes the default.
type ServeOpts struct {
	// Drain bounds the shutdown once the context ends (see Serve). Default 10s.
	Drain time.Duration
	// Timeouts bound each connection's requests; each unset field takes its default.
	Timeouts
	// TLS, when its files are set, serves HTTPS (TLS 1.2 at least) with that certificate and key,
	// read once before anything is served. Default: plain HTTP.
	TLS TLSFiles
}

// Timeouts bound the phases of an HTTP connection, so that a slow or idle client cannot hold a
// connection (and its goroutine) for as long as it likes: http.Server's ReadHeaderTimeout,
// ReadTimeout, WriteTimeout and IdleTimeout. Every endpoint but one reads a request, answers and is
// done, so each phase has a plain bound; the event stream (GET /v1/events) extends its own write
// deadline as it writes.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers: a client that sends them slowly, or opens a
	// connection and sends nothing, has it closed. Default 5s; never more than Read, which bounds
	// the headers too.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body, from its first byte: a client that
	// trickles its body has its read fail (the handler answers it, if it can) and its connection
	// closed. It does not bound the handler once the body is read. Default 30s.
	Read time.Duration
	// Write bounds a request from the end of its headers to the end of its response: a client that
	// does not read its response has its connection closed, and so does a request still running
	// then: its handler is not cancelled, but its answer is lost. Default 60s.
	Write time.Duration
	// Idle is how long a keep-alive connection may wait for its next request. Default 60s.
	Idle time.Duration
}

// defaultTimeouts are the timeouts of unset fields.
var defaultTimeouts = Timeouts{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: time.Minute, Idle: time.Minute}

// defaultDrain is ServeOpts.Drain when unset: the server's -shutdown-timeout default.
const defaultDrain = 10 * time.Second

// maxTimeout bounds each of Timeouts: a longer one would not protect anything.
const maxTimeout = time.Hour

// Flags defines -read-header-timeout, -read-timeout, -write-timeout and -idle-timeout, whose
// defaults are RECKON_READ_HEADER_TIMEOUT, RECKON_READ_TIMEOUT, RECKON_WRITE_TIMEOUT and
// RECKON_IDLE_TIMEOUT, else the fields' defaults. Check the values with Validate after parsing.
func (t *Timeouts) Flags(e *EnvFlags) {
	e.DurationVar(&t.ReadHeader, "read-header-timeout", "RECKON_READ_HEADER_TIMEOUT", defaultTimeouts.ReadHeader,
		"how long a client may take to send a request's headers")
	e.DurationVar(&t.Read, "read-timeout", "RECKON_READ_TIMEOUT", defaultTimeouts.Read,
		"how long a client may take to send a whole request, body included; a slower one has its connection closed")
	e.DurationVar(&t.Write, "write-timeout", "RECKON_WRITE_TIMEOUT", defaultTimeouts.Write,
		"how long a request may take from its headers to the end of its response; then its connection is closed")
	e.DurationVar(&t.Idle, "idle-timeout", "RECKON_IDLE_TIMEOUT", defaultTimeouts.Idle,
		"how long a keep-alive connection may wait for its next request")
}

// Validate reports, naming their flags, the timeouts that are not between 1ms and 1h. A zero
// timeout is refused: Serve fills in the defaults of unset fields before it validates them.
func (t Timeouts) Validate() error {
	var problems []error
	for _, timeout := range []struct {
		flag  string
		value time.Duration
	}{
		{"-read-header-timeout", t.ReadHeader}, {"-read-timeout", t.Read}, {"-write-timeout", t.Write}, {"-idle-timeout", t.Idle},
	} {
		if timeout.value < time.Millisecond || timeout.value > maxTimeout {
			problems = append(problems, fmt.Errorf("%s %v: want 1ms to %v", timeout.flag, timeout.value, maxTimeout))
		}
	}
	return errors.Join(problems...)
}

// withDefaults returns a copy of opts (nil: none) with every unset field at its default.
func (opts *ServeOpts) withDefaults() ServeOpts {
	var o ServeOpts
	if opts != nil {
		o = *opts
	}
	if o.Drain == 0 {
		o.Drain = defaultDrain
	}
	if o.ReadHeader == 0 {
		o.ReadHeader = defaultTimeouts.ReadHeader
	}
	if o.Read == 0 {
		o.Read = defaultTimeouts.Read
	}
	if o.Write == 0 {
		o.Write = defaultTimeouts.Write
	}
	if o.Idle == 0 {
		o.Idle = defaultTimeouts.Idle
	}
	return o
}

// validate reports what is wrong with o once its defaults are set.
func (o ServeOpts) validate() error {
	if o.Drain < 0 {
		return fmt.Errorf("drain %v must not be negative", o.Drain)
	}
	return errors.Join(o.Timeouts.Validate(), o.TLS.Validate())
}
