package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Subscription is a webhook subscription: the events matching Patterns (and, when Tenant is set,
// of that tenant) are POSTed to URL in log order, by effects of the connector WebhookConnector.
type Subscription struct {
	ID uuid.UUID `json:"id"`
	// Tenant is the tenant whose events are delivered; "" for every tenant's.
	Tenant   string   `json:"tenant,omitempty"`
	URL      string   `json:"url"`
	Patterns []string `json:"patterns"`
	// Secret signs the deliveries (the Reckon-Signature header). Returned by Create only.
	Secret string `json:"secret,omitempty"`
	// Position is the last event handed to delivery; at creation, the log's head.
	Position ID `json:"position"`
	// Delivery is the effect delivering the batch in flight, if one is.
	Delivery *uuid.UUID `json:"delivery_effect_id,omitempty"`
	// State is "active" or "paused"; PausedReason says why a paused one is.
	State        string    `json:"state"`
	PausedReason string    `json:"paused_reason,omitempty"`
	CreatedBy    string    `json:"created_by"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Subscription states.
const (
	SubscriptionActive = "active"
	SubscriptionPaused = "paused"
)

// NewSubscription describes a subscription to create.
type NewSubscription struct {
	// Tenant scopes the subscription to one tenant's events. Default "": every tenant's.
	Tenant string
	// URL receives the deliveries: http or https, at most MaxURLBytes. Required.
	URL string
	// Patterns select event types (Filter.Patterns). Default: every type.
	Patterns []string
	// Secret is the key of the HMAC-SHA256 signature of each delivery, 16 to 256 bytes. Default: 32
	// random bytes, hex-encoded (returned by Create, never again).
	Secret string
	// CreatedBy names who creates it. Required.
	CreatedBy string
}

// MaxURLBytes bounds a subscription's URL.
const MaxURLBytes = 2048

// SubscriptionError is an input of a subscription that cannot be stored: Field names it
// ("url", "patterns", "secret", "tenant", "created_by"). The HTTP API answers it with 400.
type SubscriptionError struct {
	Field   string
	Problem string
}

// Error names the field and its problem.
func (e *SubscriptionError) Error() string {
	return "events: subscription " + e.Field + " " + e.Problem
}

// ErrSubscriptionNotFound: no subscription of that id in the caller's scope.
var ErrSubscriptionNotFound = errors.New("events: subscription not found")

// Validate returns a *SubscriptionError for the first field that cannot be stored.
func (s *NewSubscription) Validate() error {
	text := func(field, v string, max int) error {
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return &SubscriptionError{Field: field, Problem: "is not valid UTF-8 text without NUL"}
		}
		if len(v) > max {
			return &SubscriptionError{Field: field, Problem: fmt.Sprintf("is longer than %d bytes", max)}
		}
		return nil
	}
	if err := text("url", s.URL, MaxURLBytes); err != nil {
		return err
	}
	if err := ValidateURL(s.URL); err != nil {
		return err
	}
	if err := text("tenant", s.Tenant, 200); err != nil {
		return err
	}
	if err := text("created_by", s.CreatedBy, 200); err != nil {
		return err
	}
	if s.CreatedBy == "" {
		return &SubscriptionError{Field: "created_by", Problem: "is required"}
	}
	if err := text("secret", s.Secret, 256); err != nil {
		return err
	}
	if s.Secret != "" && len(s.Secret) < 16 {
		return &SubscriptionError{Field: "secret", Problem: "is shorter than 16 bytes"}
	}
	if len(s.Patterns) > MaxPatterns {
		return &SubscriptionError{Field: "patterns", Problem: fmt.Sprintf("has more than %d patterns", MaxPatterns)}
	}
	for _, p := range s.Patterns {
		if err := ValidatePattern(p); err != nil {
			return &SubscriptionError{Field: "patterns", Problem: strings.TrimPrefix(err.Error(), "events: ")}
		}
	}
	return nil
}

// ValidateURL returns a *SubscriptionError unless u is an absolute http or https URL with a host.
func ValidateURL(u string) error {
	if u == "" {
		return &SubscriptionError{Field: "url", Problem: "is required"}
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || !strings.HasPrefix(u, parsed.Scheme+"://") {
		return &SubscriptionError{Field: "url", Problem: "is not an absolute http or https URL"}
	}
	return nil
}

// Subscriptions stores webhook subscriptions. The deliveries are made by a Webhooks plugin in the
// reactors (see Webhooks).
type Subscriptions struct {
	db effects.DBTX
}

// NewSubscriptions returns the subscriptions stored in db's database.
func NewSubscriptions(db effects.DBTX) *Subscriptions { return &Subscriptions{db: db} }

// Create stores a subscription positioned at the log's head: it delivers the events written from
// now on. Errors: a *SubscriptionError for bad input, and the database's.
func (s *Subscriptions) Create(ctx context.Context, in NewSubscription) (*Subscription, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	secret := in.Secret
	if secret == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		secret = hex.EncodeToString(b)
	}
	patterns := in.Patterns
	if patterns == nil {
		patterns = []string{}
	}
	q := dbsqlc.New(s.db)
	row, err := q.EventSubscriptionInsert(ctx, dbsqlc.EventSubscriptionInsertParams{
		ID: uuid.New(), TenantID: nonEmpty(in.Tenant), Url: in.URL, Patterns: patterns, Secret: secret, CreatedBy: in.CreatedBy,
	})
	if err != nil {
		return nil, fmt.Errorf("events: create subscription: %w", err)
	}
	_ = q.EventSubscriptionWake(ctx) // a wake-up only: the deliverers look every second regardless
	sub := subscriptionFromRow(dbsqlc.EventSubscriptionGetRow(row))
	sub.Secret = secret
	return sub, nil
}

// Get returns the subscription id; scope, when set, is the caller's tenant, and another tenant's
// subscription is ErrSubscriptionNotFound.
func (s *Subscriptions) Get(ctx context.Context, scope string, id uuid.UUID) (*Subscription, error) {
	row, err := dbsqlc.New(s.db).EventSubscriptionGet(ctx, dbsqlc.EventSubscriptionGetParams{ID: id, Scope: nonEmpty(scope)})
	if err != nil {
		return nil, notFound(err, id)
	}
	return subscriptionFromRow(row), nil
}

// ListOpts pages a list. Nil means the first page of the default size.
type ListOpts struct {
	// After is the last subscription of the previous page. Default: none (the first page).
	After *Subscription
	// Limit is the most subscriptions returned, 1 to 1000. Default 100.
	Limit int
}

// List returns the subscriptions in scope (every one when scope is ""), oldest first.
func (s *Subscriptions) List(ctx context.Context, scope string, opts *ListOpts) ([]*Subscription, error) {
	params := dbsqlc.EventSubscriptionListParams{Scope: nonEmpty(scope), MaxRows: 100}
	if opts != nil {
		if opts.Limit > 0 && opts.Limit <= 1000 {
			params.MaxRows = int32(opts.Limit)
		}
		if opts.After != nil {
			params.AfterCreatedAt, params.AfterID = &opts.After.CreatedAt, opts.After.ID
		}
	}
	rows, err := dbsqlc.New(s.db).EventSubscriptionList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("events: list subscriptions: %w", err)
	}
	subs := make([]*Subscription, 0, len(rows))
	for _, r := range rows {
		subs = append(subs, subscriptionFromRow(dbsqlc.EventSubscriptionGetRow(r)))
	}
	return subs, nil
}

// Delete removes the subscription id in scope. A delivery in flight fails (its subscription is
// gone) and nothing more is delivered. Errors: ErrSubscriptionNotFound.
func (s *Subscriptions) Delete(ctx context.Context, scope string, id uuid.UUID) error {
	n, err := dbsqlc.New(s.db).EventSubscriptionDelete(ctx, dbsqlc.EventSubscriptionDeleteParams{ID: id, Scope: nonEmpty(scope)})
	if err != nil {
		return fmt.Errorf("events: delete subscription %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrSubscriptionNotFound, id)
	}
	return nil
}

// Pause stops delivering the subscription id in scope, with reason (required), until Resume. A
// delivery in flight still ends. Pausing a paused one replaces its reason.
func (s *Subscriptions) Pause(ctx context.Context, scope string, id uuid.UUID, reason string) (*Subscription, error) {
	if reason == "" || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) || len(reason) > 1000 {
		return nil, &SubscriptionError{Field: "reason", Problem: "is required: UTF-8 text without NUL, at most 1000 bytes"}
	}
	if _, err := dbsqlc.New(s.db).EventSubscriptionPause(ctx, dbsqlc.EventSubscriptionPauseParams{ID: id, Scope: nonEmpty(scope), Reason: &reason}); err != nil {
		return nil, notFound(err, id)
	}
	return s.Get(ctx, scope, id)
}

// Resume delivers a paused subscription again from its position: after a delivery that ended
// FAILED or STUCK, from the first event of that delivery's batch, so none is skipped. Resuming an
// active one does nothing. A position older than events retention kept cannot be resumed from:
// the deliverer pauses it again, saying so.
func (s *Subscriptions) Resume(ctx context.Context, scope string, id uuid.UUID) (*Subscription, error) {
	q := dbsqlc.New(s.db)
	if _, err := q.EventSubscriptionResume(ctx, dbsqlc.EventSubscriptionResumeParams{ID: id, Scope: nonEmpty(scope)}); err != nil {
		return nil, notFound(err, id)
	}
	_ = q.EventSubscriptionWake(ctx) // a wake-up only, as in Create
	return s.Get(ctx, scope, id)
}

func notFound(err error, id uuid.UUID) error {
	if postgres.NoRows(err) {
		return fmt.Errorf("%w: %s", ErrSubscriptionNotFound, id)
	}
	return fmt.Errorf("events: subscription %s: %w", id, err)
}

func subscriptionFromRow(r dbsqlc.EventSubscriptionGetRow) *Subscription {
	sub := &Subscription{
		ID: r.ID, URL: r.Url, Patterns: r.Patterns, Position: ID{XID: uint64(r.PositionXid), Seq: r.PositionSeq},
		Delivery: r.DeliveryEffectID, State: r.State, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.TenantID != nil {
		sub.Tenant = *r.TenantID
	}
	if r.PausedReason != nil {
		sub.PausedReason = *r.PausedReason
	}
	if sub.Patterns == nil {
		sub.Patterns = []string{}
	}
	return sub
}
