package conf_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/conf"
)

type config struct{ N int }

func (c *config) setDefaults() {
	if c.N == 0 {
		c.N = 3
	}
}

func (c *config) Validate() error {
	if c.N < 0 {
		return errors.New("N must not be negative")
	}
	return nil
}

func TestResolve(t *testing.T) {
	t.Parallel()
	got, err := conf.Resolve(nil, (*config).setDefaults)
	require.NoError(t, err)
	require.Equal(t, config{N: 3}, got, "nil is the zero config, defaulted")

	in := &config{N: 7}
	got, err = conf.Resolve(in, (*config).setDefaults)
	require.NoError(t, err)
	require.Equal(t, config{N: 7}, got)

	in = &config{}
	got, err = conf.Resolve(in, (*config).setDefaults)
	require.NoError(t, err)
	require.Equal(t, config{N: 3}, got)
	require.Equal(t, config{}, *in, "the caller's value is not changed")

	_, err = conf.Resolve(&config{N: -1}, (*config).setDefaults)
	require.EqualError(t, err, "N must not be negative")
}
