// Package fakehttp holds what the fake upstreams share — package reckontest's Upstream and
// internal/testkit/fakebank, internal/testkit/fakejobs: answering JSON, reading a bounded JSON body, and the two
// ways of not answering (dropping the connection, holding the request); and what the Go connectors
// of the fakes share to call them (Post).
package fakehttp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// MaxBody bounds the request bodies ReadJSON reads.
const MaxBody = 1 << 20

// ReadJSON reads the whole body (so that the server notices a client that goes away while the
// request is held), at most MaxBody bytes, and decodes it into v. An empty body is an error.
func ReadJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return errors.New("empty body")
	}
	return json.Unmarshal(body, v)
}

// WriteJSON answers status with v as JSON (a 500 if v cannot be encoded).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"encoding response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// WriteError answers status with {"error": msg}.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, map[string]string{"error": msg})
}

// Hold keeps the request unanswered until the client goes away or closing is closed; then the
// connection is dropped, so that the client never mistakes the release for an answer.
func Hold(w http.ResponseWriter, r *http.Request, closing <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-closing:
		Drop(w)
	}
}

// Drop closes the request's connection without writing a response.
func Drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (cannot happen with an HTTP/1.1 server): abort the response the way
		// net/http provides, which also leaves the client without an answer.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
