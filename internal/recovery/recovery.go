// Package recovery turns a panic in user code — a connector, a settle hook, a saga's step builder,
// a turn handler — into an error, so that one effect, step or turn fails and the reactor's worker
// goes on. It is the one place Reckon recovers panics of the code it calls; HTTP handlers have
// their own recovery, which also answers the request.
package recovery

import (
	"fmt"
	"runtime/debug"
)

// Panic is the error of a call that panicked. Its message names the call and the panic's value;
// the stack is kept apart, for logs, so that stored errors stay short.
type Panic struct {
	What  string // the code that was called: "connector", "hook", "handler", ...
	Value any    // what was passed to panic
	Stack []byte // the goroutine's stack where it panicked
}

func (p *Panic) Error() string { return fmt.Sprintf("%s panicked: %v", p.What, p.Value) }

// Call calls fn and returns what it returns; if fn panics, it returns the zero T and a *Panic.
func Call[T any](what string, fn func() (T, error)) (result T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Panic{What: what, Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// Do is Call for a function that returns only an error.
func Do(what string, fn func() error) error {
	_, err := Call(what, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}
