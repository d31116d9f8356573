package console

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/saga"
)

// listPageSize is the page size of the sagas, runs and sessions lists.
const listPageSize = 50

type sagaListData struct {
	Filter url.Values
	States []saga.State
	Sagas  []*saga.Saga
	Next   string
}

var sagaStates = []saga.State{saga.StateRunning, saga.StateCompleted, saga.StateCompensating, saga.StateCompensated, saga.StateStuck}

func (c *Console) sagaList(req *request) error {
	query := req.URL.Query()
	filter, err := ops.ParseSagaFilter(query)
	if err != nil {
		return err
	}
	filter.Scope = req.scope
	list, next, err := c.ops.Sagas(req.ctx(), filter)
	if err != nil {
		return err
	}
	data := sagaListData{Filter: query, States: sagaStates, Sagas: list}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	return c.page(req, "sagas", "Sagas", data)
}

type sagaData struct {
	*ops.SagaDetail
	// Order names the steps in compensation order.
	Order     []saga.StepRecord
	Decisions []saga.Decision
	Notice    string
}

func (c *Console) sagaPage(req *request) error {
	id, err := pathID(req)
	if err != nil {
		return err
	}
	detail, err := c.ops.Saga(req.ctx(), req.scope, id)
	if err != nil {
		return err
	}
	data := sagaData{SagaDetail: detail, Decisions: []saga.Decision{saga.RetryCompensation, saga.MarkCompensated}}
	if req.URL.Query().Get("done") == "resolved" {
		data.Notice = "Resolved."
	}
	for _, index := range detail.CompensationOrder {
		if i := slices.IndexFunc(detail.Saga.Steps, func(s saga.StepRecord) bool { return s.Index == index }); i >= 0 {
			data.Order = append(data.Order, detail.Saga.Steps[i])
		} else {
			data.Order = append(data.Order, saga.StepRecord{Index: index, Name: "step " + strconv.Itoa(index)})
		}
	}
	return c.page(req, "saga", "Saga "+shortID(id), data)
}

func (c *Console) resolveSaga(req *request) error {
	id, err := pathID(req)
	if err != nil {
		return err
	}
	decision := saga.Decision(req.PostForm.Get("decision")) // checked by ops, with the reason
	if _, err := c.ops.ResolveSaga(req.ctx(), req.scope, id, decision, req.actor(), req.PostForm.Get("reason")); err != nil {
		return err
	}
	return req.redirect("/console/sagas/" + id.String() + "?done=resolved")
}

type runListData struct {
	Tenant string
	Runs   []*effects.Run
	Next   string
}

func (c *Console) runList(req *request) error {
	query := req.URL.Query()
	filter := ops.RunFilter{Scope: req.scope, Tenant: query.Get("tenant"), Limit: listPageSize, After: query.Get("after")}
	if filter.Tenant != "" {
		if err := ident.ValidateTenantID(filter.Tenant); err != nil {
			return badField("tenant", "%v", err)
		}
	}
	list, next, err := c.ops.Runs(req.ctx(), filter)
	if err != nil {
		return err
	}
	data := runListData{Tenant: filter.Tenant, Runs: list}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	return c.page(req, "runs", "Runs", data)
}

type runData struct {
	*ops.RunDetail
	States  []effects.State
	Effects string // the effects page filtered to the run
	Notice  string
}

func (c *Console) runPage(req *request) error {
	tenant, id := req.PathValue("tenant"), req.PathValue("id")
	detail, err := c.ops.Run(req.ctx(), req.scope, tenant, id)
	if err != nil {
		return err
	}
	data := runData{RunDetail: detail, States: effects.States,
		Effects: "/console/effects?" + url.Values{"tenant": {tenant}, "run": {id}}.Encode()}
	if req.URL.Query().Get("done") == "cancelled" {
		data.Notice = "Run cancelled."
	}
	return c.page(req, "run", "Run "+id, data)
}

func (c *Console) cancelRun(req *request) error {
	tenant, id := req.PathValue("tenant"), req.PathValue("id")
	if _, err := c.ops.CancelRun(req.ctx(), req.scope, tenant, id, req.actor(), req.PostForm.Get("reason")); err != nil {
		return err
	}
	return req.redirect("/console/runs/" + url.PathEscape(tenant) + "/" + url.PathEscape(id) + "?done=cancelled")
}

type sessionListData struct {
	Sessions []ops.SessionSummary
	Next     string
}

func (c *Console) sessionList(req *request) error {
	list, next, err := c.ops.Sessions(req.ctx(), req.scope, listPageSize, req.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	data := sessionListData{Sessions: list}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	return c.page(req, "sessions", "Sessions", data)
}

func (c *Console) sessionPage(req *request) error {
	key := req.PathValue("session")
	detail, err := c.ops.Session(req.ctx(), req.scope, key)
	if err != nil {
		return err
	}
	return c.page(req, "session", "Session "+key, detail)
}

// sagaProgress says where a saga is, in words that fit its state: "2 of 2 done", "1 of 3 done;
// running #1 reserve", "compensating #0 debit", "#1 credit failed; 1 compensated", "STUCK at
// #1 credit". Steps are named by their index (the steps table's #) and name.
func sagaProgress(s *saga.Saga) string {
	counts := map[saga.StepState]int{}
	failed := ""
	for _, step := range s.Steps {
		counts[step.State]++
		if step.State == saga.StepFailed {
			failed = stepName(s, step.Index)
		}
	}
	done := counts[saga.StepConfirmed]
	switch s.State {
	case saga.StateCompleted:
		return fmt.Sprintf("%d of %d done", s.StepCount, s.StepCount)
	case saga.StateRunning:
		return fmt.Sprintf("%d of %d done; running %s", done, s.StepCount, stepName(s, s.CurrentStep))
	case saga.StateCompensating:
		return fmt.Sprintf("compensating %s", stepName(s, s.CurrentStep))
	case saga.StateCompensated:
		if failed == "" {
			return fmt.Sprintf("%d compensated", counts[saga.StepCompensated])
		}
		return fmt.Sprintf("%s failed; %d compensated", failed, counts[saga.StepCompensated])
	case saga.StateStuck:
		return fmt.Sprintf("STUCK at %s", stepName(s, s.CurrentStep))
	}
	return fmt.Sprintf("step %d of %d", s.CurrentStep, s.StepCount)
}

// stepName is "#index name" (the name when the step has started).
func stepName(s *saga.Saga, index int) string {
	for _, step := range s.Steps {
		if step.Index == index {
			return fmt.Sprintf("#%d %s", index, step.Name)
		}
	}
	return fmt.Sprintf("#%d", index)
}
