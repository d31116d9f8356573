package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// maxCancelGrace bounds the part of -shutdown-timeout kept for cancelled requests to return.
const maxCancelGrace = 2 * time.Second

// serve listens on addr and serves handler until ctx ends, then shuts down within drain: requests
// in flight may finish during most of it; those still running then (a hung client, a request
// waiting for a database connection) have their contexts cancelled and their connections closed,
// and get the rest of drain (at most maxCancelGrace) to return. Request contexts do not end with
// ctx itself, so a SIGTERM never interrupts a request that can finish in time.
func serve(ctx context.Context, logger *slog.Logger, addr string, handler http.Handler, drain time.Duration) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	var inFlight atomic.Int64
	server := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			handler.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	logger.Info("listening", slog.String("server", "http"), slog.String("addr", listener.Addr().String()))

	errc := make(chan error, 1)
	go func() { errc <- server.Serve(listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	deadline := time.Now().Add(drain)
	grace := min(drain/4, maxCancelGrace)
	shutdownCtx, cancel := context.WithDeadline(context.Background(), deadline.Add(-grace))
	err = server.Shutdown(shutdownCtx)
	cancel()
	if err != nil {
		logger.Warn("shutdown: cancelling the requests still running", slog.Int64("requests", inFlight.Load()), slog.Duration("after", drain-grace))
		cancelRequests()
		_ = server.Close() // closes every connection: a hung client's request ends too
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for inFlight.Load() > 0 && time.Now().Before(deadline) {
			<-tick.C
		}
		if n := inFlight.Load(); n > 0 {
			return fmt.Errorf("http: shutdown: %d requests still running after -shutdown-timeout %s", n, drain)
		}
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}
