package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/turns"
)

func TestChannelPolicies(t *testing.T) {
	t.Parallel()
	defaults := turns.DefaultPolicies()
	require.Equal(t, turns.AggregationOff, defaults["email"].Mode)
	for channel, window := range map[string]time.Duration{"whatsapp": 1200 * time.Millisecond, "sms": 800 * time.Millisecond, "web": 600 * time.Millisecond} {
		require.Equal(t, turns.AggregationAdaptive, defaults[channel].Mode, channel)
		require.Equal(t, window, defaults[channel].Window, channel)
		require.Equal(t, 200*time.Millisecond, defaults[channel].MinWindow, channel)
		require.Equal(t, 3*time.Second, defaults[channel].MaxWindow, channel)
	}
	require.Equal(t, turns.ChannelPolicy{Mode: turns.AggregationAdaptive, Window: 800 * time.Millisecond, MinWindow: 200 * time.Millisecond, MaxWindow: 3 * time.Second}, turns.DefaultPolicy)

	at := func(offsets ...int) []time.Time {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		times := make([]time.Time, len(offsets))
		for i, ms := range offsets {
			times[i] = base.Add(time.Duration(ms) * time.Millisecond)
		}
		return times
	}
	adaptive := defaults["whatsapp"]
	for _, tc := range []struct {
		name     string
		policy   turns.ChannelPolicy
		arrivals []time.Time
		window   time.Duration
	}{
		{"off", defaults["email"], at(0, 10), 0},
		{"fixed", turns.ChannelPolicy{Mode: turns.AggregationFixed, Window: time.Second}, at(0, 100, 200), time.Second},
		{"adaptive, one message", adaptive, at(0), 1200 * time.Millisecond},
		{"adaptive, a quick burst", adaptive, at(0, 150, 300), 300 * time.Millisecond},
		{"adaptive, a very quick burst is bounded below", adaptive, at(0, 10, 20), 200 * time.Millisecond},
		{"adaptive, a slow burst is bounded above", adaptive, at(0, 2500, 5000), 3 * time.Second},
		{"adaptive, the last gaps count", adaptive, at(0, 5000, 5100, 5200, 5300, 5400, 5500), 200 * time.Millisecond},
	} {
		require.Equal(t, tc.window, tc.policy.WindowFor(tc.arrivals), tc.name)
	}

	require.Error(t, turns.ChannelPolicy{Mode: turns.AggregationAdaptive, Window: time.Second, MinWindow: 2 * time.Second, MaxWindow: 3 * time.Second}.Validate())
	require.Error(t, turns.ChannelPolicy{Mode: turns.AggregationFixed, Window: -time.Second}.Validate())
	require.NoError(t, adaptive.Validate())
}

func TestParseSessionKey(t *testing.T) {
	t.Parallel()
	session, err := turns.ParseSessionKey(turns.SessionKey("t1", "a1", "u1", "sms"))
	require.NoError(t, err)
	require.Equal(t, turns.Session{Tenant: "t1", Agent: "a1", Interlocutor: "u1", Channel: "sms"}, session)
	_, err = turns.ParseSessionKey("t1:a1:u1")
	require.ErrorIs(t, err, turns.ErrInvalidSessionKey)
}

// Messages that arrive within the channel's window form one logical turn, processed by the River
// job once the window after the last of them closed; a message after that turn forms a new one.
func TestAggregationWindow(t *testing.T) {
	t.Parallel()
	const window = 800 * time.Millisecond
	type seen struct {
		turn     *turns.Record
		messages []string
		at       time.Time
	}
	processed := make(chan seen, 10)
	var h *harness
	h = setup(t, turns.Config{
		Policies: map[string]turns.ChannelPolicy{"chat": {Mode: turns.AggregationFixed, Window: window}},
		Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
			record, err := h.tc.Get(ctx, turn.ID)
			if err != nil {
				return err
			}
			var ids []string
			for _, m := range turn.Messages() {
				ids = append(ids, m.MessageID)
			}
			processed <- seen{turn: record, messages: ids, at: time.Now()}
			return nil
		}),
	})
	h.start()
	session := newSession("chat")

	m1 := h.submit(session, "m1")
	// A later message within the window moves the turn's close to its own arrival plus the window.
	time.Sleep(window / 4) // a gap in the burst: test input, not synchronisation
	m2 := h.submit(session, "m2")
	require.Equal(t, *m1.TurnID, *m2.TurnID, "both in the accumulating turn")
	var first seen
	select {
	case first = <-processed:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn was never processed")
	}
	require.Equal(t, []string{"m1", "m2"}, first.messages)
	require.Equal(t, "timeout", first.turn.AggregationReason)
	require.Equal(t, window, first.turn.Window)
	require.Equal(t, m2.ReceivedAt, first.turn.LastAt)
	require.False(t, first.turn.StartedAt.Before(m2.ReceivedAt.Add(window)), "processing started after the window following the last message (started %v, last %v)", first.turn.StartedAt, m2.ReceivedAt)
	require.Eventually(t, func() bool {
		records := h.turnsOf(session)
		return len(records) == 1 && records[0].Status == turns.StatusComplete
	}, 30*time.Second, 10*time.Millisecond)

	m3 := h.submit(session, "m3")
	require.NotEqual(t, *m1.TurnID, *m3.TurnID)
	var second seen
	select {
	case second = <-processed:
	case <-time.After(30 * time.Second):
		t.Fatal("the second turn was never processed")
	}
	require.Equal(t, []string{"m3"}, second.messages)
	require.Equal(t, int64(2), second.turn.Seq)
	require.NotEqual(t, first.turn.Group, second.turn.Group)
	require.False(t, second.turn.StartedAt.Before(m3.ReceivedAt.Add(window)))
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_turns WHERE session_key = $1 AND status = 'COMPLETE'`, session) == 2
	}, 30*time.Second, 10*time.Millisecond)
}

// With aggregation off (email) a message is processed as soon as a worker takes its job.
func TestAggregationOff(t *testing.T) {
	t.Parallel()
	processed := make(chan []turns.Message, 1)
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		processed <- turn.Messages()
		return nil
	})})
	h.start()
	session := newSession("email")
	m := h.submit(session, "mail-1")
	select {
	case got := <-processed:
		require.Len(t, got, 1)
		require.Equal(t, m.ID, got[0].ID)
	case <-time.After(30 * time.Second):
		t.Fatal("never processed")
	}
	record, err := h.tc.Get(context.Background(), *m.TurnID)
	require.NoError(t, err)
	require.Equal(t, time.Duration(0), record.Window)
}
