// Package ssetest reads Server-Sent Events in tests, with a plain net/http client, the way a
// browser's EventSource does: GET /v1/events, then one event per blank-line-ended block.
package ssetest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Event is one event of a stream: its id, event type and data lines, or a comment line
// (": keepalive") alone.
type Event struct {
	ID, Type, Data string
	Comment        string
}

// Stream is an open event stream.
type Stream struct {
	// Response is the answer; its body is the stream's.
	Response *http.Response
	events   chan Event
	done     chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
}

// Open sends GET url with the bearer token and the headers (name, value pairs) and returns the
// stream when the answer is 200; otherwise nil and the answer with its body read. The stream is
// closed when the test ends.
func Open(tb testing.TB, url, token string, headers ...string) (*Stream, *http.Response, []byte) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		tb.Fatalf("ssetest: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatalf("ssetest: GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return nil, resp, raw
	}
	s := &Stream{Response: resp, events: make(chan Event, 1024), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go s.read()
	tb.Cleanup(s.Close)
	return s, resp, nil
}

func (s *Stream) read() {
	defer close(s.done)
	scanner := bufio.NewScanner(s.Response.Body)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	send := func(ev Event) bool {
		select {
		case s.events <- ev:
			return true
		case <-s.ctx.Done():
			return false
		}
	}
	var ev Event
	var data []string
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case line == "":
			if ev.ID != "" || ev.Type != "" || len(data) > 0 {
				ev.Data = strings.Join(data, "\n")
				if !send(ev) {
					return
				}
			}
			ev, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
			if !send(Event{Comment: strings.TrimSpace(line[1:])}) {
				return
			}
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Type = value
			case "data":
				data = append(data, value)
			}
		}
	}
}

// Next returns the next event, comments skipped; false when the stream ends first or timeout
// passes.
func (s *Stream) Next(tb testing.TB, timeout time.Duration) (Event, bool) {
	tb.Helper()
	return s.next(timeout, func(ev Event) bool { return ev.Comment == "" })
}

// Comment waits for the next comment line, events skipped, and returns its text; false when the
// stream ends first or timeout passes.
func (s *Stream) Comment(tb testing.TB, timeout time.Duration) (string, bool) {
	tb.Helper()
	ev, ok := s.next(timeout, func(ev Event) bool { return ev.Comment != "" })
	return ev.Comment, ok
}

// next waits for the next line that want accepts, skipping the others; false when the stream
// ends first or timeout passes. The lines read before the stream ended are still looked at.
func (s *Stream) next(timeout time.Duration, want func(Event) bool) (Event, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-s.events:
			if want(ev) {
				return ev, true
			}
		case <-s.done:
			select {
			case ev := <-s.events:
				if want(ev) {
					return ev, true
				}
				continue
			default:
			}
			return Event{}, false
		case <-timer.C:
			return Event{}, false
		}
	}
}

// Ended waits up to timeout for the server to end the stream, and reports whether it did.
func (s *Stream) Ended(timeout time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Close disconnects. It may be called more than once.
func (s *Stream) Close() {
	s.cancel()
	<-s.done
	s.Response.Body.Close()
}
