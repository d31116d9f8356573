package turns

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Status is a turn's place in its life.
type Status string

const (
	// StatusAccumulating: gathering inbound messages until its aggregation window closes.
	StatusAccumulating Status = "ACCUMULATING"
	// StatusProcessing: its handler runs under the session mutex.
	StatusProcessing Status = "PROCESSING"
	// StatusCommitting: its commit transaction is running.
	StatusCommitting Status = "COMMITTING"
	// StatusComplete: committed, with its staged mutations and effects.
	StatusComplete Status = "COMPLETE"
	// StatusSuperseded: stopped; a later turn of its turn group took its messages.
	StatusSuperseded Status = "SUPERSEDED"
	// StatusFailed: its handler or commit failed on every attempt (Config.MaxAttempts).
	StatusFailed Status = "FAILED"
)

// Record is a turn as stored in reckon_turns.
type Record struct {
	ID         uuid.UUID
	SessionKey string
	// Seq numbers the session's turns from 1.
	Seq int64
	// Group is the turn group: turns linked by supersede (and retries) share it, and so do the
	// idempotency keys of their effects.
	Group   uuid.UUID
	Status  Status
	Channel string
	// MessageIDs are the inbox ids of the turn's messages, sorted.
	MessageIDs []uuid.UUID
	// BeatKey identifies the set of messages (set when processing starts); a session processes a
	// set once.
	BeatKey string
	// FirstAt and LastAt are the receive times of its first and last message; Window is the
	// aggregation window after LastAt.
	FirstAt, LastAt time.Time
	Window          time.Duration
	// AggregationReason says why the turn closed: off, timeout, adaptive, retry or run_now.
	AggregationReason string
	// Attempt counts the attempts at the turn's messages in its group (retries after a failure
	// or a dead holder).
	Attempt             int
	CommitPointReached  bool
	SideEffectsExecuted int
	// Holder is the client id that runs (or ran) the turn; HolderPID the backend pid of its
	// mutex connection.
	Holder       string
	HolderPID    int
	SupersededBy *uuid.UUID
	StatusReason string
	CreatedAt    time.Time
	StartedAt    *time.Time
	CompletedAt  *time.Time
}

func recordFromRow(row dbsqlc.ReckonTurn) *Record {
	r := &Record{
		ID: row.ID, SessionKey: row.SessionKey, Seq: row.Seq, Group: row.TurnGroup, Status: Status(row.Status),
		Channel: row.Channel, MessageIDs: row.MessageIds, BeatKey: deref(row.BeatKey), FirstAt: row.FirstAt,
		LastAt: row.LastAt, Window: time.Duration(row.WindowMs) * time.Millisecond,
		AggregationReason: deref(row.AggregationReason), Attempt: int(row.Attempt),
		CommitPointReached: row.CommitPointReached, SideEffectsExecuted: int(row.SideEffectsExecuted),
		Holder: deref(row.Holder), HolderPID: int(deref(row.HolderPid)), SupersededBy: row.SupersededBy,
		StatusReason: deref(row.StatusReason), CreatedAt: row.CreatedAt, StartedAt: row.StartedAt,
		CompletedAt: row.CompletedAt,
	}
	if r.MessageIDs == nil {
		r.MessageIDs = []uuid.UUID{}
	}
	return r
}

// Message is an inbound message in the inbox.
type Message struct {
	// ID is the inbox id.
	ID         uuid.UUID
	SessionKey string
	// MessageID is the caller's id of the message, unique per session.
	MessageID  string
	Channel    string
	Content    json.RawMessage
	ReceivedAt time.Time
	// SentAt is the sender's time of the message, when the submitter gave it (Inbound.SentAt).
	SentAt *time.Time
	// TurnID is the turn that holds the message.
	TurnID *uuid.UUID
	// Deduplicated is set by Submit when the session already had a message with this MessageID:
	// this is that message, and nothing new was recorded.
	Deduplicated bool
}

func messageFromRow(row dbsqlc.ReckonMessage) Message {
	return Message{
		ID: row.ID, SessionKey: row.SessionKey, MessageID: row.MessageID, Channel: row.Channel,
		Content: row.Content, ReceivedAt: row.ReceivedAt, SentAt: row.SentAt, TurnID: row.TurnID,
	}
}

func messagesFromRows(rows []dbsqlc.ReckonMessage) []Message {
	messages := make([]Message, len(rows))
	for i, row := range rows {
		messages[i] = messageFromRow(row)
	}
	return messages
}

// DecisionRecord is a supersede decision as stored in reckon_turn_decisions.
type DecisionRecord struct {
	ID         int64
	TurnID     uuid.UUID
	SessionKey string
	Action     Action
	Reason     string
	// Decider is "application" or "default".
	Decider    string
	MessageIDs []uuid.UUID
	DecidedAt  time.Time
}

// beatKey is the digest of a sorted set of message ids.
func beatKey(ids []uuid.UUID) string {
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	h := sha256.New()
	for _, id := range sorted {
		h.Write(id[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
