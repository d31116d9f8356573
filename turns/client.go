package turns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/conf"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/service"
	"github.com/reckonhq/reckon/internal/txn"
)

// Handler processes one logical turn. It reads turn.Messages, stages its database mutations
// (Turn.Stage) and effects (Turn.Enqueue), and calls Turn.BeforeIrreversible before anything
// irreversible. Returning nil commits everything staged, atomically with the turn's move to
// COMPLETE; returning an error commits nothing, and the turn is attempted again later (up to
// Config.MaxAttempts). A handler that gets ErrSuperseded returns it.
type Handler interface {
	HandleTurn(ctx context.Context, turn *Turn) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, turn *Turn) error

// HandleTurn calls f.
func (f HandlerFunc) HandleTurn(ctx context.Context, turn *Turn) error { return f(ctx, turn) }

// Config configures a Client. Every field has a default.
type Config struct {
	// Handler processes the turns. Default: none — a process that only submits messages needs
	// none; its turn jobs wait, as for a Readier that is not ready, until a process with a
	// handler runs them.
	Handler Handler
	// Decider chooses what a turn does about messages that arrive while it runs. Default
	// DefaultDecider (the conservative DefaultDecision).
	Decider Decider
	// Policies gives the aggregation policy per channel (the session key's last part), over
	// DefaultPolicies. Channels in neither use DefaultPolicy.
	Policies map[string]ChannelPolicy
	// AcquireTimeout bounds the wait for the session mutex. Default 10s.
	AcquireTimeout time.Duration
	// MaxAttempts bounds the attempts at one set of messages: a turn whose handler or commit
	// failed (or whose holder died) that many times becomes FAILED. Default 5.
	MaxAttempts int
	// TurnTimeout bounds a turn run by a River job (handler and commit). Default 5m.
	TurnTimeout time.Duration
	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the client's Prometheus metrics. Default: none (not exported).
	Registerer prometheus.Registerer
	// RecoverInterval is how often Recover, which takes over turns whose holder died or failed,
	// runs: in every process whose effects client, which the client is installed in, is started
	// (a service of that client) and, as a River periodic job, on the leader. Negative: never
	// (call Recover yourself). Default 30s.
	RecoverInterval time.Duration
	// NotReadyDelay is how long a turn job waits before asking a Readier handler again after it
	// answered not ready. Default 30s.
	NotReadyDelay time.Duration
	// ID names this process in reckon_turns.holder. Default: the ID of the effects client the
	// client is installed in (effects.Config.ID).
	ID string
	// Queue is the River queue of the turn jobs (aggregation windows and the periodic recovery).
	// Default: the effects client's queue (effects.Config.Queue), which every River client on
	// that queue then must be able to work: a reactor without the turn workers fetches turn jobs
	// it cannot run. Another queue keeps them to the processes that install a turns client:
	// Install adds it to the effects client's River client, with QueueWorkers workers.
	Queue string
	// QueueWorkers is how many turn jobs run at once per process on Queue, when Queue is not the
	// effects client's queue (otherwise they share effects.Config.Workers). Default 10.
	QueueWorkers int

	defaultDecider bool
}

func (c *Config) setDefaults() {
	if c.Decider == nil {
		c.Decider = DefaultDecider
		c.defaultDecider = true
	}
	policies := DefaultPolicies()
	for channel, p := range c.Policies {
		policies[channel] = p
	}
	for channel, p := range policies {
		policies[channel] = p.withDefaults()
	}
	c.Policies = policies
	c.AcquireTimeout = cmp.Or(c.AcquireTimeout, 10*time.Second)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 5)
	c.RecoverInterval = cmp.Or(c.RecoverInterval, 30*time.Second)
	c.NotReadyDelay = cmp.Or(c.NotReadyDelay, 30*time.Second)
	c.TurnTimeout = cmp.Or(c.TurnTimeout, 5*time.Minute)
	c.QueueWorkers = cmp.Or(c.QueueWorkers, 10)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports what is wrong with the configuration.
func (c *Config) Validate() error {
	switch {
	case c.AcquireTimeout < 0 || c.TurnTimeout < 0 || c.NotReadyDelay < 0:
		return errors.New("turns: Config.AcquireTimeout, TurnTimeout and NotReadyDelay must not be negative")
	case c.MaxAttempts < 1 || c.MaxAttempts > 1000:
		return fmt.Errorf("turns: Config.MaxAttempts must be between 1 and 1000, got %d", c.MaxAttempts)
	case c.QueueWorkers < 1 || c.QueueWorkers > 10000:
		return fmt.Errorf("turns: Config.QueueWorkers must be between 1 and 10000, got %d", c.QueueWorkers)
	}
	for channel, p := range c.Policies {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("channel %q: %w", channel, err)
		}
	}
	return nil
}

// Client submits inbound messages and runs logical turns. It is safe for concurrent use.
//
// It is a plugin of an effects.Client (effects.Config.Plugins), whose River client runs its
// aggregation jobs and which enqueues the turns' effects:
//
//	tc, err := turns.NewClient(pool, &turns.Config{Handler: handler})
//	ec, err := effects.NewClient(pool, &effects.Config{Registry: registry, Plugins: []effects.Plugin{tc}})
//	err = ec.Start(ctx) // runs the turns too
type Client struct {
	config  Config
	pool    *pgxpool.Pool
	queries *dbsqlc.Queries
	mutex   *Mutex
	logger  *slog.Logger
	metrics *metrics

	mu       sync.RWMutex
	effects  *effects.Client // the effects client it is installed in
	jobs     *effects.Jobs   // inserts its jobs through that client's River client
	jobQueue string          // the River queue of its jobs
}

// NewClient returns a Client on pool; pass it in effects.Config.Plugins before using it.
func NewClient(pool *pgxpool.Pool, config *Config) (*Client, error) {
	cfg, err := conf.Resolve(config, (*Config).setDefaults)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Client{config: cfg, pool: pool, queries: dbsqlc.New(pool), mutex: NewMutex(pool), logger: cfg.Logger, metrics: m}, nil
}

// Install makes the client a plugin of the effects client being built (effects.Config.Plugins):
// the turn workers (River job kinds "reckon_turn" and "reckon_turn_recover") run on its River
// client, on Config.Queue (by default the effects client's), with the periodic recovery, and the
// recovery ticker is a service of the effects client (effects.PluginHost.AddService), run while it
// is started; the turns' jobs are inserted and their effects enqueued through it. Every River client that works the turn jobs' queue must
// have these workers, which is why a client without a Handler installs them too: its turn jobs
// wait (as for a Readier that is not ready) until a process with a handler runs them.
func (c *Client) Install(host *effects.PluginHost) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.effects != nil {
		return errors.New("turns: client already installed in an effects client")
	}
	if err := effects.AddWorker(host, &turnWorker{client: c}); err != nil {
		return err
	}
	if err := effects.AddWorker(host, &recoverWorker{client: c}); err != nil {
		return err
	}
	queue := host.Queue()
	if c.config.Queue != "" && c.config.Queue != queue {
		queue = c.config.Queue
		if err := host.AddQueue(queue, river.QueueConfig{MaxWorkers: c.config.QueueWorkers}); err != nil {
			return fmt.Errorf("turns: %w", err)
		}
	}
	c.jobQueue = queue
	if c.config.ID == "" {
		c.config.ID = host.Client().ID()
	}
	if c.config.RecoverInterval > 0 {
		if err := host.AddService(service.NewLoop(c.recoverLoop)); err != nil {
			return err
		}
		host.AddPeriodicJob(river.NewPeriodicJob(
			river.PeriodicInterval(c.config.RecoverInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return recoverArgs{}, &river.InsertOpts{Queue: queue, MaxAttempts: 1}
			},
			nil,
		))
	}
	c.effects = host.Client()
	c.jobs = host.Jobs()
	return nil
}

// queue returns the River queue of the turn jobs.
func (c *Client) queue() string { return c.jobQueue }

func (c *Client) effectsClient() (*effects.Client, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.effects == nil {
		return nil, ErrNotAttached
	}
	return c.effects, nil
}

// Mutex returns the session mutex the client's turns hold.
func (c *Client) Mutex() *Mutex { return c.mutex }

// ID returns the name this client writes into reckon_turns.holder.
func (c *Client) ID() string { return c.config.ID }

// policy returns the aggregation policy of a channel.
func (c *Client) policy(channel string) ChannelPolicy {
	if p, ok := c.config.Policies[channel]; ok {
		return p
	}
	return DefaultPolicy
}

// Inbound is a message to submit.
type Inbound struct {
	// SessionKey is tenant:agent:interlocutor:channel. Required.
	SessionKey string
	// MessageID is the caller's id of the message (the channel's), unique per session: a second
	// submit of the same id does nothing. Default: a new UUID.
	MessageID string
	// Content is the message: a json.RawMessage, []byte of JSON, or any value encoding/json
	// marshals. Default {}.
	Content any
	// SentAt is the sender's time of the message, when the caller knows it; recorded for the
	// handler (Message.SentAt). Aggregation windows run on the time the message is received.
	SentAt *time.Time
}

// SubmitTx records an inbound message in tx, the caller's transaction, adds it to the session's
// accumulating turn (opening one if none), and schedules that turn for when its aggregation
// window closes after this message (a River job, one per accumulating turn while scheduled). All
// of it exists once tx commits and none of it if tx rolls back.
//
// A message id the session already has returns the recorded message with Deduplicated set and
// changes nothing. A bad session key or content changes nothing; a database error aborts tx.
func (c *Client) SubmitTx(ctx context.Context, tx pgx.Tx, in Inbound) (*Message, error) {
	ec, err := c.effectsClient()
	if err != nil {
		return nil, err
	}
	session, err := ParseSessionKey(in.SessionKey)
	if err != nil {
		return nil, err
	}
	content, err := jsonx.Marshal(in.Content)
	if err != nil {
		return nil, fmt.Errorf("turns: submit to %q: content: %w", in.SessionKey, err)
	}
	if err := jsonx.CheckText(in.MessageID); err != nil {
		return nil, fmt.Errorf("turns: submit to %q: MessageID: %w", in.SessionKey, err)
	}
	messageID := in.MessageID
	if messageID == "" {
		messageID = uuid.NewString()
	}
	q := dbsqlc.New(tx)
	if err := scheduleLock(in.SessionKey).LockTx(ctx, tx); err != nil {
		return nil, fmt.Errorf("turns: submit to %q: lock session: %w", in.SessionKey, err)
	}
	row, err := q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
		ID: uuid.Must(uuid.NewV7()), SessionKey: in.SessionKey, MessageID: messageID, Channel: session.Channel, Content: content,
		SentAt: in.SentAt,
	})
	if postgres.NoRows(err) {
		existing, err := q.MessageGetByMessageID(ctx, dbsqlc.MessageGetByMessageIDParams{SessionKey: in.SessionKey, MessageID: messageID})
		if err != nil {
			return nil, fmt.Errorf("turns: submit to %q: read message %q: %w", in.SessionKey, messageID, err)
		}
		m := messageFromRow(existing)
		m.Deduplicated = true
		return &m, nil
	} else if err != nil {
		return nil, fmt.Errorf("turns: submit to %q: insert message: %w", in.SessionKey, err)
	}

	policy := c.policy(session.Channel)
	turn, err := q.TurnGetAccumulating(ctx, in.SessionKey)
	switch {
	case postgres.NoRows(err):
		turn, err = q.TurnInsert(ctx, dbsqlc.TurnInsertParams{
			ID: uuid.Must(uuid.NewV7()), SessionKey: in.SessionKey, TurnGroup: uuid.New(), Channel: session.Channel,
			MessageIds: []uuid.UUID{row.ID}, FirstAt: row.ReceivedAt, LastAt: row.ReceivedAt,
			WindowMs: int32(policy.WindowFor([]time.Time{row.ReceivedAt}) / time.Millisecond), Attempt: 1,
		})
		if err != nil {
			return nil, fmt.Errorf("turns: submit to %q: open turn: %w", in.SessionKey, err)
		}
	case err != nil:
		return nil, fmt.Errorf("turns: submit to %q: read accumulating turn: %w", in.SessionKey, err)
	default:
		previous, err := q.MessageListByTurn(ctx, &turn.ID)
		if err != nil {
			return nil, fmt.Errorf("turns: submit to %q: read turn messages: %w", in.SessionKey, err)
		}
		arrivals := make([]time.Time, 0, len(previous)+1)
		for _, m := range previous {
			arrivals = append(arrivals, m.ReceivedAt)
		}
		arrivals = append(arrivals, row.ReceivedAt)
		turn, err = q.TurnAddMessages(ctx, dbsqlc.TurnAddMessagesParams{
			ID: turn.ID, MessageIds: []uuid.UUID{row.ID}, FirstAt: row.ReceivedAt, LastAt: row.ReceivedAt,
			WindowMs: int32(policy.WindowFor(arrivals) / time.Millisecond),
		})
		if err != nil {
			return nil, fmt.Errorf("turns: submit to %q: add message to turn: %w", in.SessionKey, err)
		}
	}
	if err := q.MessageAssign(ctx, dbsqlc.MessageAssignParams{ID: row.ID, TurnID: &turn.ID}); err != nil {
		return nil, fmt.Errorf("turns: submit to %q: assign message: %w", in.SessionKey, err)
	}
	row.TurnID = &turn.ID
	due := turn.LastAt.Add(time.Duration(turn.WindowMs) * time.Millisecond)
	if _, err := c.jobs.InsertTx(ctx, tx, turnArgs{SessionKey: in.SessionKey, TurnID: turn.ID}, c.jobOpts(ec, due)); err != nil {
		return nil, fmt.Errorf("turns: submit to %q: schedule turn: %w", in.SessionKey, err)
	}
	m := messageFromRow(row)
	return &m, nil
}

// Submit is SubmitTx in a transaction of its own.
func (c *Client) Submit(ctx context.Context, in Inbound) (*Message, error) {
	var m *Message
	err := txn.Run(ctx, c.pool, c.logger, func(tx pgx.Tx) error {
		var err error
		m, err = c.SubmitTx(ctx, tx, in)
		return err
	})
	return m, err
}

// Get returns a turn by id.
func (c *Client) Get(ctx context.Context, id uuid.UUID) (*Record, error) {
	row, err := c.queries.TurnGet(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	} else if err != nil {
		return nil, fmt.Errorf("turns: get %s: %w", id, err)
	}
	return recordFromRow(row), nil
}

// GetTx returns a turn by id as tx sees it, e.g. the turn a message joined in SubmitTx before tx
// commits.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*Record, error) {
	row, err := dbsqlc.New(tx).TurnGet(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	} else if err != nil {
		return nil, fmt.Errorf("turns: get %s: %w", id, err)
	}
	return recordFromRow(row), nil
}

// List returns a session's turns in order.
func (c *Client) List(ctx context.Context, sessionKey string) ([]*Record, error) {
	rows, err := c.queries.TurnListBySession(ctx, sessionKey)
	if err != nil {
		return nil, fmt.Errorf("turns: list %q: %w", sessionKey, err)
	}
	records := make([]*Record, len(rows))
	for i, row := range rows {
		records[i] = recordFromRow(row)
	}
	return records, nil
}

// Messages returns a turn's messages in the order received.
func (c *Client) Messages(ctx context.Context, turnID uuid.UUID) ([]Message, error) {
	rows, err := c.queries.MessageListByTurn(ctx, &turnID)
	if err != nil {
		return nil, fmt.Errorf("turns: messages of %s: %w", turnID, err)
	}
	return messagesFromRows(rows), nil
}

// Decisions returns the supersede decisions a turn took, in order.
func (c *Client) Decisions(ctx context.Context, turnID uuid.UUID) ([]DecisionRecord, error) {
	rows, err := c.queries.TurnDecisionListByTurn(ctx, turnID)
	if err != nil {
		return nil, fmt.Errorf("turns: decisions of %s: %w", turnID, err)
	}
	records := make([]DecisionRecord, len(rows))
	for i, row := range rows {
		records[i] = DecisionRecord{
			ID: row.ID, TurnID: row.TurnID, SessionKey: row.SessionKey, Action: Action(row.Action), Reason: row.Reason,
			Decider: row.Decider, MessageIDs: row.MessageIds, DecidedAt: row.DecidedAt,
		}
	}
	return records, nil
}

// Holder is a session-mutex lock seen in pg_locks: a holder (Granted) or a waiter.
type Holder struct {
	// PID is the backend pid of the connection.
	PID     int
	Granted bool
	// TurnID, SessionKey, Status, Holder and StartedAt describe the in-flight turn the connection
	// runs; nil/empty for a lock held without a turn (a direct Mutex user) or awaited.
	TurnID     *uuid.UUID
	SessionKey string
	Status     Status
	Holder     string
	StartedAt  *time.Time
}

// Holders lists who holds and who awaits session locks on this database, from pg_locks joined
// with the in-flight turns.
func (c *Client) Holders(ctx context.Context) ([]Holder, error) {
	rows, err := c.queries.TurnHolders(ctx, LockNamespace)
	if err != nil {
		return nil, fmt.Errorf("turns: holders: %w", err)
	}
	holders := make([]Holder, len(rows))
	for i, row := range rows {
		holders[i] = Holder{
			PID: int(row.Pid), Granted: deref(row.Granted), TurnID: row.TurnID, SessionKey: deref(row.SessionKey),
			Holder: deref(row.Holder), StartedAt: row.StartedAt,
		}
		if row.Status != nil {
			holders[i].Status = Status(*row.Status)
		}
	}
	return holders, nil
}
