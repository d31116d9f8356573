package turns

import (
	"fmt"
	"strings"
	"time"

	"github.com/reckonhq/reckon/internal/jsonx"
)

// AggregationMode says how a channel groups a burst of inbound messages into one logical turn.
type AggregationMode string

const (
	// AggregationOff processes every message as soon as possible (a turn still takes every
	// message that is waiting when it starts).
	AggregationOff AggregationMode = "off"
	// AggregationFixed waits ChannelPolicy.Window after the last message.
	AggregationFixed AggregationMode = "fixed"
	// AggregationAdaptive waits after the last message for a window that follows the pace of the
	// burst but never falls below ChannelPolicy.Window: Window after a single message; after
	// several, twice the mean of their last (up to five) gaps, at least Window and at most
	// MaxWindow (ChannelPolicy.WindowFor). A slow typist gets more time; a message within Window
	// of the previous one always joins the turn.
	AggregationAdaptive AggregationMode = "adaptive"
)

// ChannelPolicy is the aggregation behaviour of a channel: how long a turn waits, after its last
// message, for another one (WindowFor). A message that arrives within that wait joins the turn;
// a later one opens the next turn.
//
// Whatever the earlier gaps, a message that arrives within Window of the previous one joins the
// same turn (fixed and adaptive; off has no window). There is deliberately no minimum
// below Window: a quick burst never shrinks the window, which would split bursts well within
// the channel's window.
type ChannelPolicy struct {
	// Mode is off, fixed or adaptive. Default adaptive.
	Mode AggregationMode
	// Window is the fixed window, and the adaptive window's floor (the whole window after a
	// single message). Default 800ms; whole milliseconds (a turn records its window in
	// milliseconds); ignored when Mode is off.
	Window time.Duration
	// MaxWindow caps the adaptive window, which stretches above Window when the burst's gaps are
	// long (twice their mean). Default 3s, or Window if that is longer; must not be below
	// Window. Ignored unless Mode is adaptive.
	MaxWindow time.Duration
}

// DefaultPolicy is the policy of a channel with none of its own: adaptive from
// 800ms, up to 3s.
var DefaultPolicy = ChannelPolicy{Mode: AggregationAdaptive, Window: 800 * time.Millisecond, MaxWindow: 3 * time.Second}

// DefaultPolicies returns the default per-channel profiles: whatsapp adaptive from 1.2s, sms adaptive
// from 800ms, web adaptive from 600ms (each up to 3s), email off.
func DefaultPolicies() map[string]ChannelPolicy {
	adaptive := func(window time.Duration) ChannelPolicy {
		p := DefaultPolicy
		p.Window = window
		return p
	}
	return map[string]ChannelPolicy{
		"whatsapp": adaptive(1200 * time.Millisecond),
		"sms":      adaptive(800 * time.Millisecond),
		"email":    {Mode: AggregationOff},
		"web":      adaptive(600 * time.Millisecond),
	}
}

func (p ChannelPolicy) withDefaults() ChannelPolicy {
	if p.Mode == "" {
		p.Mode = AggregationAdaptive
	}
	if p.Window == 0 && p.Mode != AggregationOff {
		p.Window = DefaultPolicy.Window
	}
	if p.Mode == AggregationAdaptive && p.MaxWindow == 0 {
		p.MaxWindow = max(DefaultPolicy.MaxWindow, p.Window)
	}
	return p
}

// Validate reports what is wrong with the policy (after defaults).
func (p ChannelPolicy) Validate() error {
	switch p.Mode {
	case AggregationOff, AggregationFixed, AggregationAdaptive:
	default:
		return fmt.Errorf("turns: aggregation mode %q: must be off, fixed or adaptive", p.Mode)
	}
	if p.Window < 0 || p.MaxWindow < 0 {
		return fmt.Errorf("turns: aggregation windows must not be negative")
	}
	if p.Window > time.Hour || p.MaxWindow > time.Hour {
		return fmt.Errorf("turns: aggregation windows must be at most an hour")
	}
	if p.Window%time.Millisecond != 0 || p.MaxWindow%time.Millisecond != 0 {
		// A turn records its window in whole milliseconds: a fraction would be cut off, and a
		// message just within Window could miss the turn.
		return fmt.Errorf("turns: aggregation windows must be whole milliseconds, got %v and %v", p.Window, p.MaxWindow)
	}
	if p.Mode == AggregationAdaptive && p.MaxWindow < p.Window {
		return fmt.Errorf("turns: adaptive aggregation needs Window <= MaxWindow, got %v and %v", p.Window, p.MaxWindow)
	}
	return nil
}

// WindowFor returns how long the turn waits after the last of arrivals (the receive times of the
// turn's messages, oldest first) before it is processed:
//
//   - off: 0;
//   - fixed: Window;
//   - adaptive, one message: Window;
//   - adaptive, several: max(Window, min(2 × mean gap, MaxWindow)), the mean taken over the last
//     (up to) five gaps, from the sixth-last arrival to the last.
//
// The adaptive window is never below Window, even when MaxWindow is (a policy Validate refuses).
func (p ChannelPolicy) WindowFor(arrivals []time.Time) time.Duration {
	switch p.Mode {
	case AggregationOff:
		return 0
	case AggregationFixed:
		return p.Window
	}
	if len(arrivals) < 2 {
		return p.Window
	}
	recent := arrivals[max(0, len(arrivals)-6):]
	meanGap := recent[len(recent)-1].Sub(recent[0]) / time.Duration(len(recent)-1)
	return max(p.Window, min(2*meanGap, p.MaxWindow))
}

// reason is the aggregation reason recorded on a turn that closed under this policy.
func (p ChannelPolicy) reason() string {
	switch p.Mode {
	case AggregationOff:
		return "off"
	case AggregationFixed:
		return "timeout"
	}
	return "adaptive"
}

// SessionKey returns the key of a session, "tenant:agent:interlocutor:channel". None
// of the parts may be empty or contain a colon: see ParseSessionKey.
func SessionKey(tenant, agent, interlocutor, channel string) string {
	return tenant + ":" + agent + ":" + interlocutor + ":" + channel
}

// Session is a session key's parts.
type Session struct {
	Tenant, Agent, Interlocutor, Channel string
}

// ParseSessionKey splits a session key; an error wraps ErrInvalidSessionKey.
func ParseSessionKey(key string) (Session, error) {
	parts := strings.Split(key, ":")
	if len(parts) != 4 {
		return Session{}, fmt.Errorf("%w: %q: want tenant:agent:interlocutor:channel", ErrInvalidSessionKey, key)
	}
	for _, part := range parts {
		if part == "" {
			return Session{}, fmt.Errorf("%w: %q: empty part", ErrInvalidSessionKey, key)
		}
	}
	if err := jsonx.CheckText(key); err != nil {
		return Session{}, fmt.Errorf("%w: %q: %w", ErrInvalidSessionKey, key, err)
	}
	return Session{Tenant: parts[0], Agent: parts[1], Interlocutor: parts[2], Channel: parts[3]}, nil
}
