package mcpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/recovery"
)

// effectURIPrefix starts the URI of an effect's evidence resource: reckon://effects/{id}.
const effectURIPrefix = "reckon://effects/"

// session is one MCP session's server: one token, its tenant's tools.
type session struct {
	g     *Gateway
	token *tenants.Token
	// id names the session in derived idempotency keys; empty over HTTP, where the SDK's
	// Mcp-Session-Id is used.
	id         string
	consoleURL string
	server     *mcp.Server

	mu sync.Mutex
	// tools holds the JSON of each tool offered, by name, to add only what changed.
	tools map[string][]byte
}

// newServer is the MCP server of one session of token.
func (g *Gateway) newServer(token *tenants.Token, id, consoleURL string) *mcp.Server {
	s := &session{g: g, token: token, id: id, consoleURL: strings.TrimSuffix(consoleURL, "/"), tools: map[string][]byte{}}
	s.server = mcp.NewServer(implementation(), &mcp.ServerOptions{
		Logger:       g.logger,
		Instructions: "Every tool call is a Reckon effect: recorded once under an idempotency key, reconciled when its outcome is unknown. Never re-send a call whose outcome is being checked as a new call; read its reckon://effects/{id} resource instead.",
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{},
		},
		GetSessionID: func() string { return uuid.Must(uuid.NewV7()).String() },
	})
	s.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "effect", Title: "An effect's evidence", URITemplate: effectURIPrefix + "{id}", MIMEType: "application/json",
		Description: "An effect of this tenant: its state, args, result or error, and every transition of its audit trail.",
	}, s.readEffect)
	// Before tools/list, and before a call of a tool the session does not offer yet, the tools
	// are brought up to date with the registry (connectors come and go while a session lasts).
	s.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				s.syncTools(ctx, true)
			case "tools/call":
				if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && !s.offers(call.Params.Name) {
					s.syncTools(ctx, true)
				}
			}
			return next(ctx, method, req)
		}
	})
	// Outermost: a panic under any method (the gateway's, the SDK's) is this request's internal
	// error, logged, instead of the end of the process: the SDK recovers none.
	s.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := recovery.Call("mcp "+method, func() (mcp.Result, error) { return next(ctx, method, req) })
			var p *recovery.Panic
			if errors.As(err, &p) {
				g.logger.ErrorContext(ctx, "mcp: panic", slog.String("method", method), slog.String("error", err.Error()))
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error; the server log has the details"}
			}
			return res, err
		}
	})
	s.syncTools(context.Background(), false)
	return s.server
}

func (s *session) offers(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tools[name]
	return ok
}

// syncTools makes the server's tools the registry's connectors available to the tenant; with
// refresh, the stored HTTP connectors are reloaded first (a failure is logged: the registry as it
// is still serves).
func (s *session) syncTools(ctx context.Context, refresh bool) {
	if refresh {
		if err := s.g.config.RefreshConnectors(ctx); err != nil && ctx.Err() == nil {
			s.g.logger.WarnContext(ctx, "mcp: reload connectors", slog.String("error", err.Error()))
		}
	}
	registry := s.g.effects.Registry()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, name := range registry.Names() {
		connector, ok := registry.Get(name)
		if !ok || !offered(connector, s.token.TenantID) {
			continue
		}
		seen[name] = true
		tool := toolOf(connector)
		encoded, err := json.Marshal(tool)
		if err != nil || bytes.Equal(encoded, s.tools[name]) {
			continue
		}
		if err := addTool(s.server, tool, s.call); err != nil {
			s.g.logger.ErrorContext(ctx, "mcp: connector not offered as a tool", slog.String("connector", name), slog.String("error", err.Error()))
			continue
		}
		s.tools[name] = encoded
	}
	var gone []string
	for name := range s.tools {
		if !seen[name] {
			gone = append(gone, name)
			delete(s.tools, name)
		}
	}
	if len(gone) > 0 {
		s.server.RemoveTools(gone...)
	}
}

// offered reports whether connector is a tool of tenant's sessions: available to the tenant
// (effects.Connector.AvailableTo), and not Reckon's own (the webhook deliveries).
func offered(connector *effects.Connector, tenant string) bool {
	return connector.AvailableTo(tenant) && connector.Name != events.WebhookConnector
}

// addTool adds tool, turning a panic of the SDK's checks into an error.
func addTool(server *mcp.Server, tool *mcp.Tool, handler mcp.ToolHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	server.AddTool(tool, handler)
	return nil
}

// toolOf is connector as an MCP tool: its name, description, args schema (else any object) and
// annotations that follow its tags.
func toolOf(c *effects.Connector) *mcp.Tool {
	has := func(tag effects.Tag) bool { return slices.Contains(c.Tags, tag) }
	readOnly := has(effects.TagRead) && !has(effects.TagWrite) && !has(effects.TagDestructive)
	destructive := has(effects.TagDestructive)
	openWorld := has(effects.TagExternal) || has(effects.TagNetwork)
	var schema any = map[string]any{"type": "object"}
	if len(c.ArgsSchema) > 0 {
		schema = c.ArgsSchema
	}
	description := c.Description
	if description == "" {
		description = "Reckon connector " + c.Name + "."
	}
	return &mcp.Tool{
		Name: c.Name, Description: description, InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{
			Title: c.Name, ReadOnlyHint: readOnly, DestructiveHint: &destructive,
			IdempotentHint: readOnly || has(effects.TagIdempotent), OpenWorldHint: &openWorld,
		},
		Meta: mcp.Meta{"reckon/policy": string(effects.PolicyOf(c)), "reckon/tags": c.Tags,
			"reckon/requires_confirmation": c.RequiresConfirmation},
	}
}

// evidenceJSON is the text of a reckon://effects/{id} resource.
type evidenceJSON struct {
	Effect        *api.EffectJSON   `json:"effect"`
	Compensations []*api.EffectJSON `json:"compensations,omitempty"`
}

// readEffect answers resources/read of reckon://effects/{id}: the tenant's effect with its
// history; another tenant's is as missing as an effect that does not exist.
func (s *session) readEffect(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, err := uuid.Parse(strings.TrimPrefix(uri, effectURIPrefix))
	if !strings.HasPrefix(uri, effectURIPrefix) || err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	evidence, err := s.g.ops.Evidence(ctx, ops.Scope{Tenants: []string{s.token.TenantID}}, id)
	if errors.Is(err, ops.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		s.g.logger.ErrorContext(ctx, "mcp: read effect", slog.String("effect_id", id.String()), slog.String("error", err.Error()))
		return nil, errors.New("the effect could not be read; retry later")
	}
	out := evidenceJSON{Effect: api.EffectToJSON(evidence.Effect)}
	out.Effect.History = api.TransitionsToJSON(evidence.History)
	for _, c := range evidence.Compensations {
		out.Compensations = append(out.Compensations, api.EffectToJSON(c))
	}
	text, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(text)}}}, nil
}
