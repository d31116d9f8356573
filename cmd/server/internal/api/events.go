package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/ident"
)

// The event stream over HTTP (docs/api.md, "Events"): GET /v1/events answers Server-Sent Events,
// one per event of the log (package events) that the request's patterns select, in log order,
// from a position on. A client that reconnects with the last id it received (Last-Event-ID, as
// browsers' EventSource does) misses none and gets none twice.
//
// Everything the request asks is checked, and its first page read, before the answer starts: a
// bad parameter is 400 and a position retention has dropped 410, as JSON. Then the stream holds no
// request slot: it waits for events without a connection, and each read takes one of the pool's
// for one short transaction.

// DefaultEventsKeepAlive is Config.EventsKeepAlive's default.
const DefaultEventsKeepAlive = 15 * time.Second

// eventStreamWriteTimeout bounds each write to an event stream: a client that reads nothing for so
// long has its stream ended (the server's -write-timeout would end every stream, so each write
// extends the deadline instead).
const eventStreamWriteTimeout = 30 * time.Second

// maxEventIDLen bounds an event id read from a request: the longest is 39 bytes.
const maxEventIDLen = 64

// eventParams are the query parameters of GET /v1/events.
var eventParams = []string{"pattern", "after", "tenant"}

// eventsRequest is what a GET /v1/events asks for.
type eventsRequest struct {
	filter events.Filter
	// after is the position to stream after; fromNow: none was given, stream after the head.
	after   events.ID
	fromNow bool
}

// parseEventsRequest checks the query parameters and the Last-Event-ID header of a GET
// /v1/events: every mistake is 400 naming the parameter or header, and a tenant token that asks
// for another tenant's events is 403.
func parseEventsRequest(call *Call) (eventsRequest, error) {
	var req eventsRequest
	query := call.Request.URL.Query()
	for name, values := range query {
		switch {
		case !contains(eventParams, name):
			return req, badRequest(codeInvalidParameter, "unknown query parameter %q: want %s", name, wantList(eventParams))
		case name != "pattern" && len(values) > 1:
			return req, badRequest(codeInvalidParameter, "query parameter %q given %d times", name, len(values))
		}
	}
	patterns := query["pattern"]
	if len(patterns) > events.MaxPatterns {
		return req, badRequest(codeInvalidParameter, "pattern given %d times: at most %d patterns", len(patterns), events.MaxPatterns)
	}
	for _, p := range patterns {
		var pe *events.PatternError
		if err := events.ValidatePattern(p); errors.As(err, &pe) {
			return req, badRequest(codeInvalidParameter, "%s", strings.TrimPrefix(pe.Error(), "events: "))
		} else if err != nil {
			return req, badRequest(codeInvalidParameter, "pattern: %v", err)
		}
	}
	req.filter.Patterns = patterns

	tenant := call.Tenant()
	if raw, ok := query["tenant"]; ok {
		switch {
		case call.Token.System:
			if err := ident.ValidateTenantID(raw[0]); err != nil {
				return req, badRequest(codeInvalidParameter, "tenant: %v", err)
			}
			tenant = raw[0]
		case raw[0] != tenant:
			return req, errorf(http.StatusForbidden, codeForbidden,
				"tenant %q: a tenant token reads its own tenant's events only (%q); a system token reads any tenant's", quoted(raw[0]), tenant)
		}
	}
	req.filter.Tenant = tenant

	// Last-Event-ID (an EventSource that reconnects) takes precedence over after. An empty one is
	// none: EventSource sends it so once the stream reset its id.
	values, hasHeader := call.Request.Header["Last-Event-Id"]
	switch {
	case hasHeader && len(values) > 1:
		return req, badRequest(codeInvalidParameter, "Last-Event-ID given %d times", len(values))
	case hasHeader && values[0] != "":
		id, err := parseEventID("Last-Event-ID", values[0])
		if err != nil {
			return req, err
		}
		req.after = id
	case query.Has("after"):
		id, err := parseEventID("after", query.Get("after"))
		if err != nil {
			return req, err
		}
		req.after = id
	default:
		req.fromNow = true
	}
	return req, nil
}

// parseEventID reads an event id given as field (after, Last-Event-ID).
func parseEventID(field, raw string) (events.ID, error) {
	if len(raw) > maxEventIDLen {
		return events.ID{}, badRequest(codeInvalidParameter, "%s: an event id is at most %d bytes, got %d", field, maxEventIDLen, len(raw))
	}
	if err := checkHeaderText(raw); err != nil {
		return events.ID{}, badRequest(codeInvalidParameter, "%s: %v", field, err)
	}
	id, err := events.ParseID(raw)
	if err != nil {
		return events.ID{}, badRequest(codeInvalidParameter, "%s %q: want an event id (xid-seq, as in the stream's id: lines), or 0 for the oldest event kept", field, raw)
	}
	return id, nil
}

// quoted is s cut to maxEventIDLen bytes, for a message.
func quoted(s string) string {
	if len(s) > maxEventIDLen {
		return s[:maxEventIDLen] + "…"
	}
	return s
}

// streamEvents: GET /v1/events. It answers an error as JSON until the stream has started; then
// the stream ends when the client goes away, when a read fails (the client reconnects with
// Last-Event-ID) or when the server stops (Config.Stopping).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, call *Call) {
	ctx := r.Context()
	req, err := parseEventsRequest(call)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	select {
	case <-s.config.Stopping:
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "the server is stopping; retry later"))
		return
	default:
	}
	log := s.config.Events
	first, next, err := s.readFirstEvents(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	call.leave()

	stream := &eventStream{w: w, rc: http.NewResponseController(w)}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if err := stream.send(first); err != nil || r.Method == http.MethodHead {
		return
	}

	subCtx, cancel := context.WithCancel(ctx)
	items := make(chan streamItem, maxEventBatch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range log.Subscribe(subCtx, req.filter, next) {
			select {
			case items <- streamItem{ev, err}:
			case <-subCtx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		<-done
	}()
	keepAlive := time.NewTimer(s.config.EventsKeepAlive)
	defer keepAlive.Stop()
	var batch []events.Event
	for {
		select {
		case <-ctx.Done():
			return // the client went away
		case <-s.config.Stopping:
			return
		case <-keepAlive.C:
			if err := stream.write([]byte(": keepalive\n\n")); err != nil {
				return
			}
		case item := <-items:
			// The batch: the events the subscription has ready, up to maxEventBatch.
			batch = batch[:0]
			for item.err == nil {
				batch = append(batch, item.ev)
				if len(batch) == maxEventBatch {
					break
				}
				var ready bool
				select {
				case item, ready = <-items:
				default:
				}
				if !ready {
					break
				}
			}
			if err := stream.send(batch); err != nil {
				return
			}
			if item.err != nil {
				// The client reconnects with Last-Event-ID (and gets 410 if its position has
				// expired meanwhile).
				s.logger.WarnContext(ctx, "event stream ended by an error; its client reconnects",
					slog.String("path", r.URL.Path), slog.Any("error", item.err))
				return
			}
		}
		keepAlive.Reset(s.config.EventsKeepAlive)
	}
}

// readFirstEvents reads what a stream starts with: the events after the request's position (the
// log's head, from now), and the position to subscribe after. The error is the answer to the
// request: 410 events_expired for a position older than events retention kept.
func (s *Server) readFirstEvents(ctx context.Context, req eventsRequest) ([]events.Event, events.ID, error) {
	log := s.config.Events
	after := req.after
	if req.fromNow {
		var err error
		if after, err = log.Head(ctx); err != nil {
			return nil, after, fmt.Errorf("read the events' head: %w", err)
		}
	}
	first, next, _, err := log.Read(ctx, req.filter, after, events.MaxRead)
	if errors.Is(err, events.ErrExpired) {
		return nil, next, errorf(http.StatusGone, codeEventsExpired,
			"event %s is older than events retention kept: the events after it are gone; start again without after and Last-Event-ID (from now) or with after=0 (from the oldest event kept)", after)
	}
	if err != nil {
		return nil, next, fmt.Errorf("read events: %w", err)
	}
	return first, next, nil
}

// maxEventBatch bounds the events sent in one write.
const maxEventBatch = 256

// streamItem is one pair a subscription yields.
type streamItem struct {
	ev  events.Event
	err error
}

// eventStream writes Server-Sent Events.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

// send writes evs, one event each (id, event type, data: the event as JSON), and flushes them.
func (s *eventStream) send(evs []events.Event) error {
	s.buf = s.buf[:0]
	for _, ev := range evs {
		data, err := marshal(ev)
		if err != nil {
			return err
		}
		s.buf = fmt.Appendf(s.buf, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, data)
	}
	return s.write(s.buf)
}

// write writes b and flushes it (the headers alone when b is empty), within
// eventStreamWriteTimeout.
func (s *eventStream) write(b []byte) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(eventStreamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if len(b) > 0 {
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}
