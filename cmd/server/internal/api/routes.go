package api

import (
	"io"
	"net/http"

	"github.com/reckonhq/reckon/docs/openapi"
)

// routes registers the API's endpoints. It is the one place that lists them all.
func (s *Server) routes() {
	// Effects (docs/api.md).
	s.handleMutation("POST /v1/effects", s.createEffect)
	s.handleQuery("GET /v1/effects", s.listEffects)
	s.handleQuery("GET /v1/effects/{id}", s.getEffect)
	s.handleMutation("POST /v1/effects/{id}/resolve", s.resolveEffect)
	s.handleMutation("POST /v1/effects/{id}/cancel", s.cancelEffect)
	s.handleMutation("POST /v1/effects/{id}/confirm", s.confirmEffect)
	s.handleMutation("POST /v1/effects/{id}/decline", s.declineEffect)
	s.handleMutation("POST /v1/effects/{id}/redrive", s.redriveEffect)

	// Async effects and runs (docs/async.md).
	s.handleAction("POST /v1/callbacks/{correlation_id}", s.callback)
	s.handleMutation("POST /v1/runs", s.startRun)
	s.handleQuery("GET /v1/runs/{id}", s.getRun)
	s.handleAction("POST /v1/runs/{id}/cancel", s.cancelRun)

	// HTTP connectors (effects/httpconn), shared by every tenant: any token reads, system tokens
	// write.
	s.handleMutation("POST /v1/connectors", s.putConnector, admitSystem)
	s.handleQuery("GET /v1/connectors", s.listConnectors, admitSystem)
	s.handleQuery("GET /v1/connectors/{name}", s.getConnector, admitSystem)
	s.handleMutation("DELETE /v1/connectors/{name}", s.deleteConnector, admitSystem)

	// Operators' connector limits (effects.Client.SetLimit), shared by every tenant like the
	// connectors: any token reads (a tenant token sees no other tenant's keys), system tokens
	// write. The changes are effects.Client's own statements, not the request's transaction:
	// handleAction.
	s.handleQuery("GET /v1/limits", s.listLimits, admitSystem)
	s.handleQuery("GET /v1/connectors/{name}/limit", s.getLimit, admitSystem)
	s.handleAction("PUT /v1/connectors/{name}/limit", s.putLimit, admitSystem)
	s.handleAction("DELETE /v1/connectors/{name}/limit", s.deleteLimit, admitSystem)
	s.handleAction("POST /v1/connectors/{name}/limit/reset", s.resetLimit, admitSystem)

	// Operators' pauses of connectors (effects.Client.PauseConnector), shared like the limits: any
	// token reads (a tenant token sees no other tenant's pauses), system tokens pause and resume.
	s.handleQuery("GET /v1/pauses", s.listPauses, admitSystem)
	s.handleAction("POST /v1/connectors/{name}/pause", s.pauseConnector, admitSystem)
	s.handleAction("POST /v1/connectors/{name}/resume", s.resumeConnector, admitSystem)

	// Sagas (section 6): definitions shared by every tenant (any token reads, system tokens
	// write), sagas per tenant.
	s.handleMutation("POST /v1/saga-definitions", s.putSagaDefinition, admitSystem)
	s.handleQuery("GET /v1/saga-definitions", s.listSagaDefinitions, admitSystem)
	s.handleQuery("GET /v1/saga-definitions/{name}", s.getSagaDefinition, admitSystem)
	s.handleMutation("POST /v1/sagas", s.startSaga)
	s.handleQuery("GET /v1/sagas", s.listSagas)
	s.handleQuery("GET /v1/sagas/{id}", s.getSaga)
	s.handleAction("POST /v1/sagas/{id}/resolve", s.resolveSaga)

	// Sessions and turns (section 5), per tenant: the session key's tenant segment is the caller's.
	s.handleMutation("POST /v1/sessions/{key}/messages", s.postMessage)
	s.handleQuery("GET /v1/sessions/{key}/turns", s.listTurns)

	// Where a tenant's turns go (turns/httpturn): a tenant's admin tokens write its own, its tokens
	// read it; system tokens read and write any tenant's.
	s.handleMutation("PUT /v1/turn-handlers/{tenant}", s.putTurnHandler, admitSystem)
	s.handleQuery("GET /v1/turn-handlers/{tenant}", s.getTurnHandler, admitSystem)
	s.handleMutation("DELETE /v1/turn-handlers/{tenant}", s.deleteTurnHandler, admitSystem)

	// The event stream (Server-Sent Events): a tenant token reads its tenant's events, a system
	// token any tenant's or every tenant's. It writes its answer itself, and gives its request
	// slot back once the stream has started.
	s.handle("GET /v1/events", []routeOption{admitSystem}, s.streamEvents)
	// Webhook subscriptions (package events): a tenant's tokens manage its own tenant's, system
	// tokens any tenant's and those of every tenant's events.
	s.handleMutation("POST /v1/event-subscriptions", s.createSubscription, admitSystem)
	s.handleQuery("GET /v1/event-subscriptions", s.listSubscriptions, admitSystem)
	s.handleQuery("GET /v1/event-subscriptions/{id}", s.getSubscription, admitSystem)
	s.handleMutation("DELETE /v1/event-subscriptions/{id}", s.deleteSubscription, admitSystem)
	s.handleMutation("POST /v1/event-subscriptions/{id}/pause", s.pauseSubscription, admitSystem)
	s.handleMutation("POST /v1/event-subscriptions/{id}/resume", s.resumeSubscription, admitSystem)

	// Schedules (package schedule), per tenant: a tenant's tokens read its own, its admin tokens
	// set and delete them; system tokens any tenant's.
	s.handleQuery("GET /v1/schedules", s.listSchedules, admitSystem)
	s.handleQuery("GET /v1/schedules/{tenant}/{name}", s.getSchedule, admitSystem)
	s.handleAction("PUT /v1/schedules/{tenant}/{name}", s.putSchedule, admitSystem)
	s.handleAction("DELETE /v1/schedules/{tenant}/{name}", s.deleteSchedule, admitSystem)
}

// documents are the OpenAPI 3.1 documents (package docs/openapi) that Register serves, with no
// token: the API's own, whose paths are exactly the routes above and these, and the connector
// wire protocol's.
var documents = []struct{ pattern, body string }{
	{"GET /openapi.json", openapi.API},
	{"GET /openapi/connector.json", openapi.Connector},
}

// serveDocument answers a GET of a JSON document.
func serveDocument(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

// routeMux is the API's http.ServeMux; it remembers the pattern of every route added (the
// OpenAPI tests hold the list to the API's document).
type routeMux struct {
	*http.ServeMux
	patterns []string
}

// Handle adds a route, as http.ServeMux.Handle does.
func (m *routeMux) Handle(pattern string, handler http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, handler)
}

// HandleFunc adds a route, as http.ServeMux.HandleFunc does.
func (m *routeMux) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(handler))
}
