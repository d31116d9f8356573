package turns

import (
	"fmt"
	"strings"
	"time"
)

// AggregationMode says how a channel groups a burst of inbound messages into one logical turn
// (seed 002).
type AggregationMode string

const (
	// AggregationOff processes every message as soon as possible (a turn still takes every
	// message that is waiting when it starts).
	AggregationOff AggregationMode = "off"
	// AggregationFixed waits ChannelPolicy.Window after the last message.
	AggregationFixed AggregationMode = "fixed"
	// AggregationAdaptive waits after the last message for a window that follows the pace of the
	// burst: Window for a single message; with several, twice their mean gap (the last five
	// gaps), kept between MinWindow and MaxWindow.
	AggregationAdaptive AggregationMode = "adaptive"
)

// ChannelPolicy is the aggregation behaviour of a channel.
type ChannelPolicy struct {
	// Mode is off, fixed or adaptive. Default adaptive.
	Mode AggregationMode
	// Window is the fixed window, and the adaptive window of a single message. Default 800ms.
	Window time.Duration
	// MinWindow and MaxWindow bound the adaptive window. Defaults 200ms and 3s.
	MinWindow, MaxWindow time.Duration
}

// DefaultPolicy is the policy of a channel with none of its own (seed 002's ChannelPolicy
// defaults).
var DefaultPolicy = ChannelPolicy{Mode: AggregationAdaptive, Window: 800 * time.Millisecond, MinWindow: 200 * time.Millisecond, MaxWindow: 3 * time.Second}

// DefaultPolicies returns seed 002's default profiles: whatsapp adaptive around 1.2s, sms
// adaptive around 800ms, email off, web adaptive around 600ms.
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
	if p.Mode == AggregationAdaptive {
		if p.MinWindow == 0 {
			p.MinWindow = min(DefaultPolicy.MinWindow, p.Window)
		}
		if p.MaxWindow == 0 {
			p.MaxWindow = max(DefaultPolicy.MaxWindow, p.Window)
		}
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
	if p.Window < 0 || p.MinWindow < 0 || p.MaxWindow < 0 {
		return fmt.Errorf("turns: aggregation windows must not be negative")
	}
	if p.Window > time.Hour || p.MaxWindow > time.Hour {
		return fmt.Errorf("turns: aggregation windows must be at most an hour")
	}
	if p.Mode == AggregationAdaptive && (p.MinWindow > p.Window || p.Window > p.MaxWindow) {
		return fmt.Errorf("turns: adaptive aggregation needs MinWindow <= Window <= MaxWindow, got %v, %v, %v", p.MinWindow, p.Window, p.MaxWindow)
	}
	return nil
}

// WindowFor returns the aggregation window after the last of arrivals (the receive times of the
// turn's messages, oldest first).
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
	from := max(0, len(arrivals)-6)
	gaps := arrivals[from:]
	mean := gaps[len(gaps)-1].Sub(gaps[0]) / time.Duration(len(gaps)-1)
	return min(max(2*mean, p.MinWindow), p.MaxWindow)
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

// SessionKey returns the key of a session, "tenant:agent:interlocutor:channel" (seed 002). None
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
	return Session{Tenant: parts[0], Agent: parts[1], Interlocutor: parts[2], Channel: parts[3]}, nil
}
