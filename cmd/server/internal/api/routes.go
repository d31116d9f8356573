package api

// routes registers the API's endpoints. It is the one place that lists them all.
func (s *Server) routes() {
	// Effects (docs/api.md).
	s.HandleMutation("POST /v1/effects", s.createEffect)
	s.HandleQuery("GET /v1/effects", s.listEffects)
	s.HandleQuery("GET /v1/effects/{id}", s.getEffect)
	s.HandleMutation("POST /v1/effects/{id}/resolve", s.resolveEffect)
	s.HandleMutation("POST /v1/effects/{id}/cancel", s.cancelEffect)
	s.HandleMutation("POST /v1/effects/{id}/confirm", s.confirmEffect)
	s.HandleMutation("POST /v1/effects/{id}/decline", s.declineEffect)

	// Async effects and runs (docs/async.md).
	s.HandleAction("POST /v1/callbacks/{correlation_id}", s.callback)
	s.HandleQuery("GET /v1/runs/{id}", s.getRun)

	// HTTP connectors (effects/httpconn), shared by every tenant: any token reads, system tokens
	// write.
	s.HandleMutation("POST /v1/connectors", s.putConnector, AdmitSystem)
	s.HandleQuery("GET /v1/connectors", s.listConnectors, AdmitSystem)
	s.HandleQuery("GET /v1/connectors/{name}", s.getConnector, AdmitSystem)
	s.HandleMutation("DELETE /v1/connectors/{name}", s.deleteConnector, AdmitSystem)

	// Sagas (section 6): definitions shared by every tenant (any token reads, system tokens
	// write), sagas per tenant.
	s.HandleMutation("POST /v1/saga-definitions", s.putSagaDefinition, AdmitSystem)
	s.HandleQuery("GET /v1/saga-definitions", s.listSagaDefinitions, AdmitSystem)
	s.HandleQuery("GET /v1/saga-definitions/{name}", s.getSagaDefinition, AdmitSystem)
	s.HandleMutation("POST /v1/sagas", s.startSaga)
	s.HandleQuery("GET /v1/sagas", s.listSagas)
	s.HandleQuery("GET /v1/sagas/{id}", s.getSaga)
	s.HandleAction("POST /v1/sagas/{id}/resolve", s.resolveSaga)

	// Sessions and turns (section 5), per tenant: the session key's tenant segment is the caller's.
	s.HandleMutation("POST /v1/sessions/{key}/messages", s.postMessage)
	s.HandleQuery("GET /v1/sessions/{key}/turns", s.listTurns)

	// Where a tenant's turns go (turns/httpturn): a tenant's admin tokens write its own, its tokens
	// read it; system tokens read and write any tenant's.
	s.HandleMutation("PUT /v1/turn-handlers/{tenant}", s.putTurnHandler, AdmitSystem)
	s.HandleQuery("GET /v1/turn-handlers/{tenant}", s.getTurnHandler, AdmitSystem)
	s.HandleMutation("DELETE /v1/turn-handlers/{tenant}", s.deleteTurnHandler, AdmitSystem)
}
