package api

import "slices"

// Routes returns the patterns of every route s serves: its /v1/ routes, in the order they were
// added, then those Register adds beside them (the OpenAPI documents).
func (s *Server) Routes() []string {
	routes := slices.Clone(s.mux.patterns)
	for _, d := range documents {
		routes = append(routes, d.pattern)
	}
	return routes
}
