package console

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

// connectorRow is a connector with its outcome rates over the last hour.
type connectorRow struct {
	ops.ConnectorSummary
	Confirmed, Failed, Unknown, Stuck, Pending int64
	// Rate is the share of settled outcomes (CONFIRMED / (CONFIRMED + FAILED + STUCK)), as text.
	Rate string
}

func newConnectorRow(summary ops.ConnectorSummary) connectorRow {
	o := summary.Outcomes
	row := connectorRow{ConnectorSummary: summary, Confirmed: o[effects.StateConfirmed], Failed: o[effects.StateFailed],
		Unknown: o[effects.StateUnknown], Stuck: o[effects.StateStuck], Pending: o[effects.StatePending], Rate: "—"}
	if settled := row.Confirmed + row.Failed + row.Stuck; settled > 0 {
		row.Rate = strconv.FormatFloat(100*float64(row.Confirmed)/float64(settled), 'f', 1, 64) + "% confirmed"
	}
	return row
}

func (c *Console) connectorList(req *request) error {
	list, err := c.ops.Connectors(req.ctx(), req.scope)
	if err != nil {
		return err
	}
	rows := make([]connectorRow, len(list))
	for i, summary := range list {
		rows[i] = newConnectorRow(summary)
	}
	return c.page(req, "connectors", "Connectors", rows)
}

type connectorData struct {
	connectorRow
	// CanChange: the operator may change the connector's limits (an operator of all tenants).
	CanChange bool
	// Form is what the limit form shows first: the operator's limit, else the connector's own.
	Form   limitForm
	Notice string
}

// limitForm is a limit as the form's fields show it.
type limitForm struct {
	Rate, Per, Burst, MaxInFlight, BreakAfter, BreakFor string
	PerTenant                                           bool
}

func newLimitForm(l effects.Limit) limitForm {
	itoa := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	duration := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	return limitForm{Rate: itoa(l.Rate), Per: duration(l.Per), Burst: itoa(l.Burst), MaxInFlight: itoa(l.MaxInFlight),
		BreakAfter: itoa(l.BreakAfter), BreakFor: duration(l.BreakFor), PerTenant: l.PerTenant}
}

// limitNotices are the messages a limit action's redirect may ask the connector's page to show
// (?done=...), each only when the connector is in the state it announces: a link cannot make the
// page say something that did not happen.
var limitNotices = map[string]struct {
	text string
	true func(ops.ConnectorSummary) bool
}{
	"set": {"Set the operator's limit: every reactor applies it within moments.",
		func(s ops.ConnectorSummary) bool { return s.Override != nil }},
	"cleared": {"Cleared the operator's limit: the connector's own applies again.",
		func(s ops.ConnectorSummary) bool { return s.Override == nil }},
	"not-set": {"There was no operator's limit to clear.",
		func(s ops.ConnectorSummary) bool { return s.Override == nil }},
	"reset": {"Reset: circuits closed, pauses ended, failures forgotten.",
		func(s ops.ConnectorSummary) bool { return !s.Throttled() }},
	"not-throttled": {"Nothing to reset: no pause, open circuit or failure.",
		func(s ops.ConnectorSummary) bool { return !s.Throttled() }},
	"paused": {"Paused: no reactor starts a call of it until an operator resumes it; calls in flight finish.",
		func(s ops.ConnectorSummary) bool { return len(s.Pauses) > 0 }},
	"already-paused": {"It was paused already: that pause stands as it was.",
		func(s ops.ConnectorSummary) bool { return len(s.Pauses) > 0 }},
	"resumed": {"Resumed: no pause holds its calls now; the effects it held go out.",
		func(s ops.ConnectorSummary) bool { return len(s.Pauses) == 0 }},
	"not-paused": {"There was no such pause to resume.",
		func(ops.ConnectorSummary) bool { return true }},
}

// connectorPage shows a connector: its limits (its own, the operator's, its keys' state) with the
// forms that change them, and its definition.
func (c *Console) connectorPage(req *request) error {
	summary, err := c.ops.Connector(req.ctx(), req.scope, req.PathValue("name"))
	if err != nil {
		return err
	}
	data := connectorData{connectorRow: newConnectorRow(*summary), CanChange: req.operator().CanAct() && req.scope.Tenants == nil}
	switch {
	case summary.Override != nil:
		data.Form = newLimitForm(summary.Override.Limit)
	case summary.Limit != nil:
		data.Form = newLimitForm(*summary.Limit)
	}
	if n, ok := limitNotices[req.URL.Query().Get("done")]; ok && n.true(*summary) {
		data.Notice = n.text
	}
	return c.page(req, "connector", "Connector "+summary.Name, data)
}

// connectorPath is the path of connector name's page, with the notice done.
func connectorPath(name, done string) string {
	return "/console/connectors/" + url.PathEscape(name) + "?" + url.Values{"done": {done}}.Encode()
}

// setLimit sets the operator's limit of the connector from the form.
func (c *Console) setLimit(req *request) error {
	limit, err := ops.ParseLimit(req.PostForm)
	if err != nil {
		return err
	}
	name := req.PathValue("name")
	if _, err := c.ops.SetLimit(req.ctx(), req.scope, name, limit, req.actor(), req.PostForm.Get("reason")); err != nil {
		return limitError(err)
	}
	return req.redirect(connectorPath(name, "set"))
}

// limitChange is an operator's change of a connector's limits that reports whether there was
// anything to change (ops.ClearLimit, ops.ResetLimit).
type limitChange func(ctx context.Context, scope ops.Scope, name string) (bool, error)

// changeLimit makes change on the connector of the path and sends the browser back to its page
// with the notice done, or nothing when there was nothing to change.
func (c *Console) changeLimit(change limitChange, done, nothing string) func(*request) error {
	return func(req *request) error {
		name := req.PathValue("name")
		changed, err := change(req.ctx(), req.scope, name)
		if err != nil {
			return limitError(err)
		}
		if !changed {
			return req.redirect(connectorPath(name, nothing))
		}
		return req.redirect(connectorPath(name, done))
	}
}

// pauseConnector pauses the connector of the path from the form (tenant_id: "" for every tenant).
func (c *Console) pauseConnector(req *request) error {
	name := req.PathValue("name")
	_, created, err := c.ops.PauseConnector(req.ctx(), req.scope, name, req.PostForm.Get("tenant_id"), req.actor(), req.PostForm.Get("reason"))
	if err != nil {
		return pauseError(err)
	}
	if !created {
		return req.redirect(connectorPath(name, "already-paused"))
	}
	return req.redirect(connectorPath(name, "paused"))
}

// resumeConnector ends the pause of the connector of the path named by the form's tenant_id.
func (c *Console) resumeConnector(req *request) error {
	name := req.PathValue("name")
	resumed, err := c.ops.ResumeConnector(req.ctx(), req.scope, name, req.PostForm.Get("tenant_id"), req.actor(), req.PostForm.Get("reason"))
	if err != nil {
		return pauseError(err)
	}
	if !resumed {
		return req.redirect(connectorPath(name, "not-paused"))
	}
	return req.redirect(connectorPath(name, "resumed"))
}

// pauseError makes ops.ErrSharedPause a 403.
func pauseError(err error) error {
	if errors.Is(err, ops.ErrSharedPause) {
		return forbidden("A connector's upstream is shared by every tenant: only an operator of all tenants may pause or resume it.")
	}
	return err
}

// limitError makes ops.ErrSharedLimit a 403.
func limitError(err error) error {
	if errors.Is(err, ops.ErrSharedLimit) {
		return forbidden("Limits are shared by every tenant: only an operator of all tenants may change them.")
	}
	return err
}

// Throttle says in a word or two why no call goes out, "" when calls do: "paused", "circuit open",
// "circuit half open", or more of them joined. An operator's pause is OperatorPause's.
func (r connectorRow) Throttle() string {
	var paused, open, halfOpen bool
	for _, s := range r.LimitStates {
		paused = paused || s.PausedUntil != nil
		open = open || s.Circuit == "open"
		halfOpen = halfOpen || s.Circuit == "half_open"
	}
	var words []string
	for _, w := range []struct {
		on   bool
		word string
	}{{paused, "paused"}, {open, "circuit open"}, {halfOpen, "circuit half open"}} {
		if w.on {
			words = append(words, w.word)
		}
	}
	return strings.Join(words, ", ")
}

// OperatorPause says whose calls an operator's pause holds, "" when none does: "every tenant",
// or "tenant a, tenant b".
func (r connectorRow) OperatorPause() string {
	var whose []string
	for _, p := range r.Pauses {
		if p.TenantID == "" {
			return "every tenant"
		}
		whose = append(whose, "tenant "+p.TenantID)
	}
	return strings.Join(whose, ", ")
}
