package console

import (
	"context"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

const (
	// stuckPageSize is how many STUCK effects, with their evidence, one page of the queue shows.
	stuckPageSize = 20
	// bulkMax bounds the effects one bulk action previews and resolves.
	bulkMax = 500
)

// landing sends the operator to the STUCK queue when it is not empty, else to the overview.
func (c *Console) landing(req *request) error {
	_, total, _, err := c.ops.Stuck(req.ctx(), req.scope, 1, "")
	if err != nil {
		return err
	}
	if total > 0 {
		return req.redirect("/console/stuck")
	}
	return req.redirect("/console/overview")
}

// overviewRow is one tenant × connector of the overview's table.
type overviewRow struct {
	Tenant, Connector                          string
	Pending, Unknown, Stuck, Confirmed, Failed int64
}

type overviewData struct {
	*ops.Overview
	Rows  []overviewRow
	Chart chart
}

func (c *Console) overview(req *request) error {
	o, err := c.ops.Overview(req.ctx(), req.scope)
	if err != nil {
		return err
	}
	data := overviewData{Overview: o, Chart: newChart(o.SettledPerMinute)}
	index := map[[2]string]int{}
	for _, count := range o.Counts {
		key := [2]string{count.Tenant, count.Connector}
		i, ok := index[key]
		if !ok {
			i = len(data.Rows)
			index[key] = i
			data.Rows = append(data.Rows, overviewRow{Tenant: count.Tenant, Connector: count.Connector})
		}
		row := &data.Rows[i]
		switch count.State {
		case effects.StatePending:
			row.Pending += count.Count
		case effects.StateUnknown:
			row.Unknown += count.Count
		case effects.StateStuck:
			row.Stuck += count.Count
		case effects.StateConfirmed:
			row.Confirmed += count.Count
		case effects.StateFailed:
			row.Failed += count.Count
		}
	}
	return c.page(req, "overview", "Overview", data)
}

// stuckItem is one effect of the STUCK queue.
type stuckItem struct {
	*ops.Evidence
	// StuckSince is when it became STUCK (its last transition into STUCK).
	StuckSince time.Time
}

type stuckData struct {
	Items   []stuckItem
	Total   int
	Next    string
	Targets []effects.State
}

func (c *Console) stuck(req *request) error {
	after := req.URL.Query().Get("after")
	page, total, next, err := c.ops.Stuck(req.ctx(), req.scope, stuckPageSize, after)
	if err != nil {
		return err
	}
	data := stuckData{Total: total, Targets: ops.ResolveTargets}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	for _, evidence := range page {
		data.Items = append(data.Items, stuckItem{Evidence: evidence, StuckSince: stuckSince(evidence)})
	}
	return c.page(req, "stuck", "STUCK queue", data)
}

// stuckSince is when the effect last became STUCK, from its history (else its last update).
func stuckSince(e *ops.Evidence) time.Time {
	for i := len(e.History) - 1; i >= 0; i-- {
		if t := e.History[i]; t.To == effects.StateStuck && t.From != effects.StateStuck {
			return t.At
		}
	}
	return e.Effect.UpdatedAt
}

type effectListData struct {
	Filter  url.Values
	States  []effects.State
	Effects []*effects.Effect
	Next    string
	Bulk    string // the bulk preview of this filter, when it lists STUCK effects
	// Redrive is the bulk redrive preview of this filter, when it lists FAILED effects.
	Redrive string
}

// effectFilterFields are the query parameters of the effects page's filter.
var effectFilterFields = []string{"tenant", "state", "connector", "idempotency_key", "business_key", "run", "turn",
	"created_after", "created_before", "limit"}

func (c *Console) effectList(req *request) error {
	query := req.URL.Query()
	filter, err := ops.ParseEffectFilter(query)
	if err != nil {
		return err
	}
	filter.Scope = req.scope
	list, next, err := c.ops.Effects(req.ctx(), filter)
	if err != nil {
		return err
	}
	data := effectListData{Filter: query, States: effects.States, Effects: list}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	if filter.State == effects.StateStuck && len(list) > 0 {
		bulk := url.Values{}
		for _, name := range effectFilterFields {
			if v := query.Get(name); v != "" && name != "limit" {
				bulk.Set(name, v)
			}
		}
		data.Bulk = "/console/bulk?" + bulk.Encode()
	}
	if filter.State == effects.StateFailed && len(list) > 0 {
		bulk := url.Values{"action": {"redrive"}}
		for _, name := range effectFilterFields {
			if v := query.Get(name); v != "" && name != "limit" {
				bulk.Set(name, v)
			}
		}
		data.Redrive = "/console/bulk?" + bulk.Encode()
	}
	return c.page(req, "effects", "Effects", data)
}

type effectData struct {
	*ops.Evidence
	StuckSince time.Time
	Targets    []effects.State
	// Cancelable: PENDING, never attempted, not awaiting a callback nor a confirmation (Decline
	// is that one's Cancel).
	Cancelable bool
	// Awaiting: the effect awaits its confirmation (Confirm and Decline).
	Awaiting bool
	// Redrivable: FAILED, and its record does not refuse a redrive (ops.Redrivable).
	Redrivable bool
	// EnqueuedBy is the actor of the effect's first transition, its insert.
	EnqueuedBy string
	Notice     string
}

// notices are the messages an action's redirect may ask the page to show (?done=...).
var notices = map[string]string{
	"resolved":  "Resolved. The decision is the last row of the timeline.",
	"cancelled": "Cancelled.",
	"confirmed": "Confirmed: the effect is dispatched as any other from now on.",
	"declined":  "Declined: the effect is FAILED and will never be dispatched.",
	"redriven":  "Redriven: the effect is PENDING again, with a fresh attempt budget and the same idempotency key; the reactors dispatch it.",
}

func (c *Console) effectPage(req *request) error {
	id, err := pathID(req)
	if err != nil {
		return err
	}
	evidence, err := c.ops.Evidence(req.ctx(), req.scope, id)
	if err != nil {
		return err
	}
	e := evidence.Effect
	awaiting := e.State == effects.StatePending && e.Confirmation == effects.ConfirmationAwaiting
	data := effectData{
		Evidence: evidence, Targets: ops.ResolveTargets, Notice: notices[req.URL.Query().Get("done")],
		Cancelable: e.State == effects.StatePending && e.Attempts == 0 && e.CorrelationID == "" && !awaiting,
		Awaiting:   awaiting, Redrivable: ops.Redrivable(e),
	}
	if len(evidence.History) > 0 && evidence.History[0].From == "" {
		data.EnqueuedBy = evidence.History[0].Actor
	}
	if e.State == effects.StateStuck {
		data.StuckSince = stuckSince(evidence)
	}
	return c.page(req, "effect", "Effect "+shortID(id), data)
}

func (c *Console) resolveEffect(req *request) error {
	id, err := pathID(req)
	if err != nil {
		return err
	}
	to, err := ops.ParseResolveTarget(req.PostForm.Get("to"))
	if err != nil {
		return err
	}
	reason := req.PostForm.Get("reason") // checked by ops, like every action's
	if _, err := c.ops.Resolve(req.ctx(), req.scope, id, to, req.actor(), reason); err != nil {
		return err
	}
	return req.redirect("/console/effects/" + id.String() + "?done=resolved")
}

// decision is an operator's decision on one effect (ops.Cancel, ops.Confirm, ops.Decline).
type decision func(ctx context.Context, scope ops.Scope, id uuid.UUID, actor, reason string) (*effects.Effect, error)

// decideEffect makes decide on the effect of the path with the form's reason, and sends the
// browser back to the effect's page with the notice done.
func (c *Console) decideEffect(decide decision, done string) func(*request) error {
	return func(req *request) error {
		id, err := pathID(req)
		if err != nil {
			return err
		}
		reason := req.PostForm.Get("reason") // checked by ops, like every action's
		if _, err := decide(req.ctx(), req.scope, id, req.actor(), reason); err != nil {
			return err
		}
		return req.redirect("/console/effects/" + id.String() + "?done=" + done)
	}
}

type awaitingData struct {
	Effects []*effects.Effect
	Total   int
	Next    string
}

// awaiting lists the effects awaiting their confirmation, longest waiting first, each with its
// prompt.
func (c *Console) awaiting(req *request) error {
	list, total, next, err := c.ops.Awaiting(req.ctx(), req.scope, ops.DefaultLimit, req.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	data := awaitingData{Effects: list, Total: total}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	return c.page(req, "awaiting", "Awaiting confirmation", data)
}

type bulkData struct {
	// Action is "redrive" for a bulk redrive of FAILED effects, "" for a bulk resolve.
	Action  string
	Filter  url.Values // the filter, without "to"
	To      effects.State
	Targets []effects.State
	Effects []*effects.Effect // the preview's
	Total   int
	Result  *ops.BulkResult
	Skipped []skippedEffect
	Reason  string
}

type skippedEffect struct {
	ID  uuid.UUID
	Why string
}

// bulkPreview lists the STUCK effects a filter matches (at most bulkMax) and what they would be
// resolved as, with the confirmation form; without "to" it asks for the decision first.
func (c *Console) bulkPreview(req *request) error {
	query := req.URL.Query()
	data := bulkData{Filter: url.Values{}, Targets: ops.ResolveTargets}
	for name, values := range query {
		if name != "to" && name != "after" && name != "action" {
			data.Filter[name] = values
		}
	}
	filter, err := ops.ParseEffectFilter(data.Filter)
	if err != nil {
		return err
	}
	switch query.Get("action") {
	case "redrive":
		return c.bulkRedrivePreview(req, data, filter)
	case "":
	default:
		return badField("action", "%q: want redrive, or none to resolve", query.Get("action"))
	}
	if filter.State != "" && filter.State != effects.StateStuck {
		return badField("state", "bulk actions resolve STUCK effects only, not %s", filter.State)
	}
	filter.Scope, filter.State = req.scope, effects.StateStuck
	data.Filter.Set("state", string(effects.StateStuck))
	if query.Get("to") != "" {
		if data.To, err = ops.ParseResolveTarget(query.Get("to")); err != nil {
			return err
		}
		if data.Effects, data.Total, err = c.ops.PreviewResolve(req.ctx(), filter, bulkMax); err != nil {
			return err
		}
	}
	return c.page(req, "bulk", "Bulk resolve", data)
}

// bulkRedrivePreview lists the FAILED effects a filter matches that a redrive does not refuse by
// their record (at most bulkMax), with the confirmation form.
func (c *Console) bulkRedrivePreview(req *request, data bulkData, filter ops.EffectFilter) error {
	if filter.State != "" && filter.State != effects.StateFailed {
		return badField("state", "a bulk redrive sends FAILED effects only, not %s", filter.State)
	}
	filter.Scope, filter.State = req.scope, effects.StateFailed
	data.Filter.Set("state", string(effects.StateFailed))
	data.Action = "redrive"
	var err error
	if data.Effects, data.Total, err = c.ops.PreviewRedrive(req.ctx(), filter, bulkMax); err != nil {
		return err
	}
	return c.page(req, "bulk", "Bulk redrive", data)
}

// bulkResolve resolves exactly the previewed ids that are still STUCK and in scope (or, with
// action=redrive, redrives those still FAILED), and shows what it did and skipped.
func (c *Console) bulkResolve(req *request) error {
	redrive := req.PostForm.Get("action") == "redrive"
	var to effects.State
	var err error
	if !redrive {
		if to, err = ops.ParseResolveTarget(req.PostForm.Get("to")); err != nil {
			return err
		}
	}
	reason := req.PostForm.Get("reason") // checked by ops, like every action's
	raw := req.PostForm["id"]
	if len(raw) == 0 {
		return badField("id", "no effects to resolve")
	}
	if len(raw) > bulkMax {
		return badField("id", "at most %d effects at once, got %d", bulkMax, len(raw))
	}
	ids := make([]uuid.UUID, 0, len(raw))
	for _, s := range raw {
		id, err := uuid.Parse(s)
		if err != nil {
			return badField("id", "%q is not an effect id (a UUID)", s)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	var result *ops.BulkResult
	if redrive {
		result, err = c.ops.RedriveMany(req.ctx(), req.scope, ids, req.actor(), reason)
	} else {
		result, err = c.ops.ResolveMany(req.ctx(), req.scope, ids, to, req.actor(), reason)
	}
	if err != nil {
		return err
	}
	data := bulkData{To: to, Result: result, Reason: reason}
	if redrive {
		data.Action = "redrive"
	}
	for _, id := range ids {
		if why, ok := result.Skipped[id]; ok {
			data.Skipped = append(data.Skipped, skippedEffect{ID: id, Why: why})
		}
	}
	if redrive {
		return c.page(req, "bulk", "Bulk redrive: done", data)
	}
	return c.page(req, "bulk", "Bulk resolve: done", data)
}

// pathID is the {id} of the path as a UUID.
func pathID(req *request) (uuid.UUID, error) {
	id, err := uuid.Parse(req.PathValue("id"))
	if err != nil {
		return uuid.Nil, badField("id", "%q is not an id (a UUID)", req.PathValue("id"))
	}
	return id, nil
}

// withQuery is the request's URL with name set to value in its query.
func withQuery(req *request, name, value string) string {
	query := req.URL.Query()
	query.Set(name, value)
	return req.URL.Path + "?" + query.Encode()
}
