package events

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/conf"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/metric"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/service"
	"github.com/reckonhq/reckon/internal/txn"
)

// WebhookConnector is the built-in connector that delivers webhook subscriptions, and the owner
// (effects.Spec.Owner) of its effects. Its events are never delivered themselves.
const WebhookConnector = "reckon.webhook"

// Delivery is the JSON body POSTed to a subscription's URL: a batch of events in log order.
type Delivery struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	// DeliveryID is the same for every attempt of one delivery (the Reckon-Delivery-Id header): a
	// receiver that has handled it answers 2xx again without handling it twice.
	DeliveryID string  `json:"delivery_id"`
	Events     []Event `json:"events"`
}

// The headers of a delivery, beside Content-Type: application/json.
const (
	HeaderDeliveryID     = "Reckon-Delivery-Id"
	HeaderSubscriptionID = "Reckon-Subscription-Id"
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>", the format
	// of signed callbacks (docs/async.md).
	HeaderSignature = "Reckon-Signature"
)

// Sign returns the Reckon-Signature header of body signed with secret at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// WebhookConfig configures the delivery of webhook subscriptions. Nil means the defaults.
type WebhookConfig struct {
	// Logger receives the deliverer's log. Default: discarded.
	Logger *slog.Logger
	// Registerer registers the metrics (reckon_webhook_*). Default: none.
	Registerer prometheus.Registerer
	// Interval is how often the deliverer looks for new events and for subscriptions whose
	// delivery has settled without a notification. Default 1s; at most 1m.
	Interval time.Duration
	// BatchSize is the most events one delivery carries. Default 100; at most MaxRead.
	BatchSize int
	// MaxAttempts bounds the attempts of one delivery: after the last fails the delivery is
	// FAILED and the subscription paused. Default 30, which with the default Backoff rides out an
	// upstream down for about 12 minutes.
	MaxAttempts int
	// Backoff is the delay before retry number attempt (1, 2, …) of a delivery. Default: 1s
	// doubling per attempt, at most 30s.
	Backoff func(attempt int) time.Duration
	// Timeout bounds each POST. Default 10s.
	Timeout time.Duration
	// Client makes the POSTs. Default: an http.Client with Timeout.
	Client *http.Client
}

func (c *WebhookConfig) setDefaults() {
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.BatchSize = cmp.Or(c.BatchSize, 100)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 30)
	if c.Backoff == nil {
		c.Backoff = func(attempt int) time.Duration {
			if attempt > 5 {
				return 30 * time.Second
			}
			return min(time.Duration(1<<max(attempt-1, 0))*time.Second, 30*time.Second)
		}
	}
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout}
	}
}

// Validate reports a setting out of range.
func (c *WebhookConfig) Validate() error {
	switch {
	case c.Interval < 0 || c.Interval > time.Minute:
		return fmt.Errorf("events: WebhookConfig.Interval %v out of range (up to 1m)", c.Interval)
	case c.BatchSize < 0 || c.BatchSize > MaxRead:
		return fmt.Errorf("events: WebhookConfig.BatchSize %d out of range (1 to %d)", c.BatchSize, MaxRead)
	case c.MaxAttempts < 0:
		return fmt.Errorf("events: WebhookConfig.MaxAttempts must be positive, got %d", c.MaxAttempts)
	case c.Timeout < 0 || c.Timeout > 5*time.Minute:
		return fmt.Errorf("events: WebhookConfig.Timeout %v out of range (up to 5m)", c.Timeout)
	}
	return nil
}

// Webhooks delivers the webhook subscriptions (Subscriptions) as effects. It is a plugin of an
// effects.Client (effects.Config.Plugins): Install registers the connector WebhookConnector, the
// settle hook of its effects and the deliverer, a loop that hands each active subscription's next
// events to a delivery as soon as events are written or a delivery settles (notifications), and
// at least every Interval. Every process whose effects client dispatches or settles effects
// (reactors, and the server, whose operators resolve STUCK ones) installs it.
//
// # Order and loss
//
// A subscription has at most one delivery in flight: an effect carrying up to BatchSize events
// after its position, in log order. The deliverer enqueues it and advances the position in one
// transaction, with the subscription's row locked (another reactor's deliverer skips it), so a
// batch is handed over exactly once. The next batch is enqueued only once the delivery is
// CONFIRMED, so a receiver gets the events in log order (and so in order per session). A delivery
// is retried with Backoff up to MaxAttempts: a receiver may see one delivery (Reckon-Delivery-Id)
// more than once, never an event after a later one it acknowledged. A delivery that ends FAILED or
// STUCK pauses the subscription (PausedReason) and puts its position back before the batch: a
// resume delivers the batch again, so nothing is skipped.
//
// The events of delivery effects themselves (connector WebhookConnector) are skipped, and the
// position moves past them: otherwise each delivery would cause the next.
type Webhooks struct {
	pool    *pgxpool.Pool
	log     *Log
	config  WebhookConfig
	metrics *webhookMetrics
	client  *effects.Client
}

// NewWebhooks returns the deliverer of the subscriptions stored in pool's database; install it in
// an effects client.
func NewWebhooks(pool *pgxpool.Pool, config *WebhookConfig) (*Webhooks, error) {
	cfg, err := conf.Resolve(config, (*WebhookConfig).setDefaults)
	if err != nil {
		return nil, err
	}
	m, err := newWebhookMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Webhooks{pool: pool, log: New(pool, nil), config: cfg, metrics: m}, nil
}

// Install registers the connector, the settle hook and the deliverer in the effects client being
// built (effects.Plugin). The deliverer is a service of the effects client
// (effects.PluginHost.AddService): it runs in every process whose effects client is started, from
// its Start to its Stop. Reactors share the work through the subscriptions' row locks (FOR UPDATE
// SKIP LOCKED); when a reactor dies, the others' deliverers carry its subscriptions on.
func (w *Webhooks) Install(host *effects.PluginHost) error {
	w.client = host.Client()
	if err := host.Client().Registry().Register(w.connector()); err != nil {
		return err
	}
	if err := host.OnSettle(WebhookConnector, w.settled); err != nil {
		return err
	}
	// The deliverer was started by a periodic job (reckon_webhooks) until it became a service: a
	// worker that does nothing works the jobs that an older leader still schedules.
	if err := effects.AddWorker(host, &delivererWorker{}); err != nil {
		return err
	}
	return host.AddService(service.NewLoop(w.deliverer))
}

// connector is the built-in connector: it POSTs a delivery to its subscription's URL, read at
// the call (so a deleted subscription's delivery fails). Every failure is retryable: a receiver
// deduplicates on Reckon-Delivery-Id, so sending a delivery again is always legal.
func (w *Webhooks) connector() effects.Connector {
	return effects.Connector{
		Name:        WebhookConnector,
		Tags:        []effects.Tag{effects.TagWrite, effects.TagIdempotent, effects.TagNetwork},
		Timeout:     w.config.Timeout,
		MaxAttempts: w.config.MaxAttempts,
		Backoff:     w.config.Backoff,
		Dispatch:    w.dispatch,
	}
}

func (w *Webhooks) dispatch(ctx context.Context, call effects.Call) (json.RawMessage, error) {
	var d struct {
		SubscriptionID uuid.UUID `json:"subscription_id"`
	}
	if err := json.Unmarshal(call.Args, &d); err != nil {
		return nil, effects.Permanent(fmt.Errorf("webhook delivery args: %w", err))
	}
	target, err := dbsqlc.New(w.pool).EventSubscriptionTarget(ctx, d.SubscriptionID)
	if postgres.NoRows(err) {
		return nil, effects.Permanent(fmt.Errorf("subscription %s was deleted", d.SubscriptionID))
	} else if err != nil {
		return nil, effects.Retryable(fmt.Errorf("read subscription %s: %w", d.SubscriptionID, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.Url, bytes.NewReader(call.Args))
	if err != nil {
		return nil, effects.Permanent(fmt.Errorf("subscription url: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "reckon-webhooks")
	req.Header.Set(HeaderDeliveryID, call.IdempotencyKey)
	req.Header.Set(HeaderSubscriptionID, d.SubscriptionID.String())
	req.Header.Set(HeaderSignature, Sign(target.Secret, time.Now(), call.Args))
	resp, err := w.config.Client.Do(req)
	if err != nil {
		return nil, effects.Retryable(fmt.Errorf("POST %s: %w", target.Url, err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, effects.Retryable(fmt.Errorf("POST %s: %s", target.Url, resp.Status))
	}
	return json.RawMessage(`{"status":` + strconv.Itoa(resp.StatusCode) + `}`), nil
}

// settled is the settle hook of the delivery effects, in the transaction that settles one: a
// confirmed delivery lets the next batch go; a failed or stuck one pauses its subscription and
// puts its position back before the batch.
func (w *Webhooks) settled(ctx context.Context, tx pgx.Tx, e *effects.Effect) error {
	q := dbsqlc.New(tx)
	if e.State == effects.StateConfirmed {
		n, err := q.EventSubscriptionDelivered(ctx, &e.ID)
		if err != nil || n == 0 {
			return err
		}
		w.metrics.deliveries.WithLabelValues("confirmed").Inc()
		return q.EventSubscriptionWake(ctx) // the next batch may go
	}
	reason := fmt.Sprintf("delivery %s ended %s: %s", e.ID, e.State, e.Error)
	n, err := q.EventSubscriptionDeliveryFailed(ctx, dbsqlc.EventSubscriptionDeliveryFailedParams{EffectID: &e.ID, Reason: &reason})
	if n > 0 {
		w.metrics.deliveries.WithLabelValues(string(e.State)).Inc()
		w.config.Logger.WarnContext(ctx, "webhooks: a delivery did not succeed; its subscription is paused until resumed",
			slog.String("effect_id", e.ID.String()), slog.String("state", string(e.State)), slog.String("error", e.Error))
	}
	return err
}

// deliverAll hands the next batch of every due subscription to delivery.
func (w *Webhooks) deliverAll(ctx context.Context) error {
	ids, err := dbsqlc.New(w.pool).EventSubscriptionDue(ctx, 1000)
	if err != nil {
		return fmt.Errorf("events: due subscriptions: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if err := w.deliverNext(ctx, id); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("events: deliver subscription %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// maxSkipRounds bounds the reads of one subscription in one round that find only events to skip.
const maxSkipRounds = 10

// deliverNext locks subscription id if it is still due, reads the events after its position and,
// in the same transaction, enqueues their delivery and advances the position past them.
func (w *Webhooks) deliverNext(ctx context.Context, id uuid.UUID) error {
	return txn.Run(ctx, w.pool, w.config.Logger, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		sub, err := q.EventSubscriptionLockDue(ctx, id)
		if postgres.NoRows(err) {
			return nil // paused, deleted, delivering, or another deliverer has it
		} else if err != nil {
			return err
		}
		position := ID{XID: uint64(sub.PositionXid), Seq: sub.PositionSeq}
		filter := Filter{Patterns: sub.Patterns}
		if sub.TenantID != nil {
			filter.Tenant = *sub.TenantID
		}
		var batch []Event
		after := position
		for range maxSkipRounds {
			evs, next, _, err := w.log.Read(ctx, filter, after, w.config.BatchSize)
			if errors.Is(err, ErrExpired) {
				reason := fmt.Sprintf("position %s is older than the events retention kept: delete the subscription and create it again", position)
				_, err = q.EventSubscriptionPause(ctx, dbsqlc.EventSubscriptionPauseParams{ID: id, Reason: &reason})
				return err
			} else if err != nil {
				return err
			}
			after = next
			for _, ev := range evs {
				if !ownDelivery(ev) {
					batch = append(batch, ev)
				}
			}
			if len(batch) > 0 || len(evs) < w.config.BatchSize {
				break
			}
		}
		if after == position {
			return nil
		}
		var effectID *uuid.UUID
		if len(batch) > 0 {
			key := fmt.Sprintf("%s/%s/%s..%s/r%d", WebhookConnector, id, batch[0].ID, batch[len(batch)-1].ID, sub.Resumes)
			tenant := effects.DefaultTenant
			if sub.TenantID != nil {
				tenant = *sub.TenantID
			}
			e, err := w.client.EnqueueTx(ctx, tx, effects.Spec{
				TenantID: tenant, Connector: WebhookConnector, IdempotencyKey: key, Owner: WebhookConnector,
				Args: Delivery{SubscriptionID: id, DeliveryID: key, Events: batch},
			}, &effects.EnqueueOpts{Actor: "webhooks", Reason: fmt.Sprintf("deliver %d events", len(batch))})
			if err != nil {
				return err
			}
			if !e.State.Settled() {
				effectID = &e.ID
			} else if e.State != effects.StateConfirmed {
				return fmt.Errorf("delivery %s is %s already", key, e.State) // cannot happen: each resume makes new keys
			}
			w.metrics.events.Add(float64(len(batch)))
			w.metrics.lag.Observe(time.Since(batch[0].At).Seconds())
		}
		return q.EventSubscriptionAdvance(ctx, dbsqlc.EventSubscriptionAdvanceParams{
			ID: id, PositionXid: int64(after.XID), PositionSeq: after.Seq, DeliveryEffectID: effectID,
		})
	})
}

// ownDelivery reports whether ev tells of a delivery effect.
func ownDelivery(ev Event) bool {
	if ev.EffectID == nil {
		return false
	}
	var p struct {
		Connector string `json:"connector"`
	}
	return json.Unmarshal(ev.Payload, &p) == nil && p.Connector == WebhookConnector
}

// delivererArgs are the arguments of the periodic job that started a process's deliverer before
// it was a service of the effects client: none.
type delivererArgs struct{}

func (delivererArgs) Kind() string { return "reckon_webhooks" }

type delivererWorker struct {
	river.WorkerDefaults[delivererArgs]
}

// Work does nothing: the deliverer runs as a service (Install).
func (w *delivererWorker) Work(context.Context, *river.Job[delivererArgs]) error { return nil }

// WakeChannel is the Postgres channel notified when a delivery settles or a subscription is made
// or resumed: the deliverers look at once instead of at their next round.
const WakeChannel = "reckon_webhooks"

// minRoundGap spaces the rounds of a deliverer woken again and again (a busy event log).
const minRoundGap = 50 * time.Millisecond

// deliverer runs rounds until ctx ends (the effects client stops): one at once, then one each time
// a delivery settles, a subscription is made or resumed, or events are written (notifications on
// WakeChannel and Channel), and one every Interval regardless. A round cut short by the stop rolls
// back: the subscription it was handing over keeps its position and no delivery is enqueued.
func (w *Webhooks) deliverer(ctx context.Context) {
	var wakeSettled, wakeEvents <-chan struct{}
	if sub, err := w.client.Listen(ctx, WakeChannel, ""); err == nil {
		defer sub.Close()
		wakeSettled = sub.C
	}
	if sub, err := w.client.Listen(ctx, Channel, ""); err == nil {
		defer sub.Close()
		wakeEvents = sub.C
	}
	w.config.Logger.DebugContext(ctx, "webhooks: deliverer started", slog.Duration("interval", w.config.Interval))
	ticker := time.NewTicker(w.config.Interval)
	defer ticker.Stop()
	for {
		if err := w.deliverAll(ctx); err != nil && ctx.Err() == nil {
			w.config.Logger.ErrorContext(ctx, "webhooks: delivery round failed; tried again next round", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-wakeSettled:
		case <-wakeEvents:
		case <-ticker.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(minRoundGap):
		}
	}
}

type webhookMetrics struct {
	deliveries *prometheus.CounterVec
	events     prometheus.Counter
	lag        prometheus.Histogram
}

func newWebhookMetrics(reg prometheus.Registerer) (*webhookMetrics, error) {
	m := &webhookMetrics{
		deliveries: metric.CounterVec("reckon_webhook_deliveries_total",
			"Webhook deliveries settled, by state: confirmed, FAILED or STUCK (which pause their subscription).", "state"),
		events: metric.Counter("reckon_webhook_events_handed_total", "Events handed to webhook deliveries."),
		lag: metric.Histogram("reckon_webhook_lag_seconds",
			"Age of the first event of a webhook delivery when it is handed to delivery.", prometheus.ExponentialBuckets(0.1, 2, 14)),
	}
	if err := metric.Register(reg, m.deliveries, m.events, m.lag); err != nil {
		return nil, fmt.Errorf("events: register webhook metrics: %w", err)
	}
	return m, nil
}
