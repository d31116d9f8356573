package console

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/saga"
)

func TestSagaProgress(t *testing.T) {
	t.Parallel()
	steps := func(states ...saga.StepState) []saga.StepRecord {
		names := []string{"debit", "credit", "notify"}
		var out []saga.StepRecord
		for i, s := range states {
			out = append(out, saga.StepRecord{Index: i, Name: names[i], State: s})
		}
		return out
	}
	for _, tc := range []struct {
		saga saga.Saga
		want string
	}{
		{saga.Saga{State: saga.StateCompleted, CurrentStep: 1, StepCount: 2, Steps: steps(saga.StepConfirmed, saga.StepConfirmed)}, "2 of 2 done"},
		{saga.Saga{State: saga.StateRunning, CurrentStep: 1, StepCount: 3, Steps: steps(saga.StepConfirmed, saga.StepRunning)}, "1 of 3 done; running #1 credit"},
		{saga.Saga{State: saga.StateCompensating, CurrentStep: 0, StepCount: 2, Steps: steps(saga.StepCompensating, saga.StepFailed)}, "compensating #0 debit"},
		{saga.Saga{State: saga.StateCompensated, CurrentStep: 0, StepCount: 3, Steps: steps(saga.StepCompensated, saga.StepFailed)}, "#1 credit failed; 1 compensated"},
		{saga.Saga{State: saga.StateStuck, CurrentStep: 1, StepCount: 2, Steps: steps(saga.StepConfirmed, saga.StepStuck)}, "STUCK at #1 credit"},
	} {
		require.Equal(t, tc.want, sagaProgress(&tc.saga), tc.saga.State)
	}
}

func TestShortIDTellsApartIDsOfOneMinute(t *testing.T) {
	t.Parallel()
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	require.Equal(t, a.String()[:8], b.String()[:8], "UUIDv7s made together share their first digits")
	require.NotEqual(t, shortID(a), shortID(b))
	require.Equal(t, "…"+a.String()[24:], shortID(a))
}
