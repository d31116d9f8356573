// Package service is the one lifecycle of background work: a Service starts and stops, a List
// starts its services in order and stops them in reverse, and a Loop is the common service, a
// goroutine run until it is stopped. It follows River's startstop package in spirit.
package service

import (
	"context"
	"errors"
	"sync"
)

// Service is background work that runs between Start and Stop.
type Service interface {
	// Start starts the work and returns once it runs, or an error if it could not start (then it
	// holds nothing: Stop is not called). Cancelling ctx after Start returned does not stop the
	// work; Stop does.
	Start(ctx context.Context) error
	// Stop ends the work started by the last successful Start and returns once it has ended. ctx
	// bounds what the stop may wait for (a drain), where the service says so.
	Stop(ctx context.Context) error
}

// Func makes a Service of two functions.
func Func(start func(ctx context.Context) error, stop func(ctx context.Context) error) Service {
	return funcService{start: start, stop: stop}
}

type funcService struct {
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

func (s funcService) Start(ctx context.Context) error { return s.start(ctx) }
func (s funcService) Stop(ctx context.Context) error  { return s.stop(ctx) }

// List starts services in the order they were added and stops them in reverse: a service may rely
// on those before it while it runs and while it stops. It is not safe for concurrent use; its
// owner serializes Start and Stop.
type List struct {
	services []Service
	started  int // how many of services (the first ones) are started
}

// Add appends services. Call it before Start.
func (l *List) Add(services ...Service) { l.services = append(l.services, services...) }

// Start starts every service in order. If one fails, Start stops those it started, in reverse, and
// returns the error. Start after Stop starts them all again.
func (l *List) Start(ctx context.Context) error {
	if l.started > 0 {
		return errors.New("service: list already started")
	}
	for _, s := range l.services {
		if err := s.Start(ctx); err != nil {
			// The started ones are stopped without waiting on ctx, which may have ended.
			_ = l.Stop(context.WithoutCancel(ctx))
			return err
		}
		l.started++
	}
	return nil
}

// Stop stops the started services in reverse order, each once, and returns their errors joined.
// It does nothing if none is started: it may be called more than once, and without Start.
func (l *List) Stop(ctx context.Context) error {
	var errs []error
	for ; l.started > 0; l.started-- {
		if err := l.services[l.started-1].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Loop is a Service that runs a function in a goroutine of its own from Start until Stop, which
// cancels the function's context and waits for it to return. It may be started again after Stop.
type Loop struct {
	prepare func(ctx context.Context) (run func(ctx context.Context), err error)

	mu     sync.Mutex
	cancel context.CancelFunc // nil while stopped
	done   chan struct{}
}

// NewLoop returns a Loop that runs run until its context ends.
func NewLoop(run func(ctx context.Context)) *Loop {
	return NewPreparedLoop(func(context.Context) (func(context.Context), error) { return run, nil })
}

// NewPreparedLoop returns a Loop whose Start first calls prepare with Start's context, and fails
// with its error, or else runs the function it returned until the loop's context ends. prepare is
// where a loop takes what it needs before it runs (a subscription, a first round), so that a
// failure fails Start.
func NewPreparedLoop(prepare func(ctx context.Context) (run func(ctx context.Context), err error)) *Loop {
	return &Loop{prepare: prepare}
}

// Start prepares the loop and starts its goroutine. The goroutine's context carries ctx's values
// but not its cancellation: Stop ends it.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return errors.New("service: loop already started")
	}
	run, err := l.prepare(ctx)
	if err != nil {
		return err
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		run(loopCtx)
	}()
	return nil
}

// Stop cancels the loop's context and waits for its function to return. It does nothing if the
// loop is not started.
func (l *Loop) Stop(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	<-l.done
	l.cancel, l.done = nil, nil
	return nil
}
