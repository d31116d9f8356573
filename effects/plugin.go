package effects

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/reckonhq/reckon/internal/service"
)

// Plugin extends a Client as it is built. Packages built on effects are plugins — a turns.Client
// runs its aggregation jobs on the Client's River client and its recovery as a service, a
// saga.Client advances sagas when their effects settle — and so is anything of an application's
// that owns effects (see OnSettle):
//
//	tc, err := turns.NewClient(pool, &turns.Config{Handler: handler})
//	sc, err := saga.NewClient(pool, &saga.Config{})
//	ec, err := effects.NewClient(pool, &effects.Config{Registry: registry, Plugins: []effects.Plugin{tc, sc}})
//
// NewClient calls each plugin's Install once, in order, before it creates the River client; an
// error fails NewClient. Nothing is installed on a Client after it is built.
type Plugin interface {
	Install(host *PluginHost) error
}

// PluginHost is what a plugin may add to the Client being built. It is valid during Install only
// (what it returns, the Client and its Jobs, may be kept).
type PluginHost struct {
	client   *Client
	workers  *river.Workers
	queues   map[string]river.QueueConfig
	periodic []*river.PeriodicJob
	services []service.Service
}

// Client returns the Client being built, for the plugin to keep: it may be used once NewClient
// has returned it.
func (h *PluginHost) Client() *Client { return h.client }

// Queue returns the River queue of the Client's jobs (Config.Queue).
func (h *PluginHost) Queue() string { return h.client.config.Queue }

// AddWorker adds a River worker to the Client's River client, which runs it on Config.Queue (and on
// the queues added with AddQueue) once the Client is started.
func AddWorker[T river.JobArgs](h *PluginHost, worker river.Worker[T]) error {
	if err := river.AddWorkerSafely(h.workers, worker); err != nil {
		return fmt.Errorf("effects: plugin worker: %w", err)
	}
	return nil
}

// AddQueue makes the Client's River client work another queue too, with its own number of
// workers.
func (h *PluginHost) AddQueue(name string, config river.QueueConfig) error {
	if name == "" {
		return errors.New("effects: plugin queue needs a name")
	}
	if _, ok := h.queues[name]; ok {
		return fmt.Errorf("effects: queue %q is already worked by this client", name)
	}
	h.queues[name] = config
	return nil
}

// AddService adds background work that runs while the Client is started: Client.Start starts the
// plugins' services after its own (River's workers among them), in the order they were added, and
// Client.Stop stops them in reverse before its own, so a service may insert jobs and enqueue
// effects until it is stopped. A service whose Start fails fails Client.Start. See Service.
func (h *PluginHost) AddService(svc Service) error {
	if svc == nil {
		return errors.New("effects: plugin service is nil")
	}
	h.services = append(h.services, svc)
	return nil
}

// Jobs returns the handle by which a plugin inserts the jobs of the workers it added (AddWorker),
// for the plugin to keep: it may be used once NewClient has returned.
func (h *PluginHost) Jobs() *Jobs { return &Jobs{client: h.client} }

// Jobs inserts River jobs through a Client's River client, for the workers plugins add
// (AddWorker); see PluginHost.Jobs. The River client itself stays the Client's: Start and Stop run
// it.
type Jobs struct {
	client *Client
}

// InsertTx inserts a job in tx: it exists once tx commits, and not at all if tx rolls back. The
// job must go to Config.Queue or a queue a plugin added (InsertOpts.Queue) to be worked, by a
// started Client whose plugins added its worker. It fails before NewClient has returned the
// Client.
func (j *Jobs) InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	if j.client.river == nil {
		return nil, errors.New("effects: Jobs.InsertTx before NewClient returned the client")
	}
	return j.client.river.InsertTx(ctx, tx, args, opts)
}

// AddPeriodicJob schedules a periodic job on the Client's River client (run by the elected
// leader among the started clients).
func (h *PluginHost) AddPeriodicJob(job *river.PeriodicJob) { h.periodic = append(h.periodic, job) }

// OnSettle registers hook for the effects whose Spec.Owner is owner: it runs inside the
// transaction that moves such an effect to CONFIRMED, FAILED or STUCK. An owned effect whose owner
// has no hook in this Client is refused — its enqueue returns ErrNoSettleHook, a reactor leaves it
// untouched (snoozes its job) and any other write that would settle it fails — so an owner is
// never silently skipped. Owned effects never go through group commit: their outcome is written in
// a transaction of its own, in which the hook runs.
func (h *PluginHost) OnSettle(owner string, hook SettleHook) error {
	if owner == "" || hook == nil {
		return errors.New("effects: OnSettle needs an owner and a hook")
	}
	if _, ok := h.client.hooks[owner]; ok {
		return fmt.Errorf("effects: owner %q already has a settle hook", owner)
	}
	h.client.hooks[owner] = hook
	return nil
}

// OnSettle returns a plugin that registers hook for the effects whose Spec.Owner is owner (see
// PluginHost.OnSettle), for an application that owns effects itself:
//
//	ec, err := effects.NewClient(pool, &effects.Config{Registry: registry,
//		Plugins: []effects.Plugin{effects.OnSettle("billing", onInvoiceEffect)}})
func OnSettle(owner string, hook SettleHook) Plugin { return settlePlugin{owner: owner, hook: hook} }

type settlePlugin struct {
	owner string
	hook  SettleHook
}

func (p settlePlugin) Install(host *PluginHost) error { return host.OnSettle(p.owner, p.hook) }
