package recovery_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/recovery"
)

// A call that returns is passed through; one that panics returns the zero value and a *Panic
// naming the call and the value, with the stack kept apart from the message.
func TestCall(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	got, err := recovery.Call("connector", func() (int, error) { return 7, boom })
	require.Equal(t, 7, got)
	require.ErrorIs(t, err, boom)

	got, err = recovery.Call("connector", func() (int, error) { panic("oops") })
	require.Zero(t, got)
	require.EqualError(t, err, "connector panicked: oops")
	p, ok := errors.AsType[*recovery.Panic](err)
	require.True(t, ok)
	require.Equal(t, "oops", p.Value)
	require.Contains(t, string(p.Stack), "recovery_test.go")

	require.NoError(t, recovery.Do("hook", func() error { return nil }))
	require.EqualError(t, recovery.Do("hook", func() error { panic(boom) }), "hook panicked: boom")
}
