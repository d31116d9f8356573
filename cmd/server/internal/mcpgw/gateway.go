package mcpgw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reckonhq/reckon/cmd/internal/version"
	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// Path is where Register mounts the gateway.
const Path = "/mcp"

// DefaultWait is the default of Config.Wait; MaxWait bounds it.
const (
	DefaultWait = 30 * time.Second
	MaxWait     = 10 * time.Minute
)

// Config configures a Gateway. Pool, Effects and Ops are required.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// Effects enqueues the tool calls' effects and reads them; its registry holds the connectors
	// offered as tools. Required. The gateway does not start it: reactors do the work.
	Effects *effects.Client
	// Ops reads an effect's evidence for the reckon://effects/{id} resources: built with the
	// saga and turns clients too, since an effect's evidence names its saga and turn. Required.
	Ops *ops.Ops
	// RefreshConnectors reloads the stored HTTP connectors into Effects's registry; called when a
	// session lists its tools and when a call names a tool the registry lacks. Default: a Sync of
	// Pool into the registry by an httpconn.Syncer of the gateway's own.
	RefreshConnectors func(ctx context.Context) error
	// Wait bounds how long tools/call waits for its effect to settle before answering that the
	// outcome is being checked. Default DefaultWait (30s); at most MaxWait.
	Wait time.Duration
	// FourEyes says the effects client refuses a confirmation by the actor that enqueued the
	// effect (effects.Config.FourEyes): a held call is then not offered to its own caller for
	// confirmation, and its answer says another person must confirm it. Default false.
	FourEyes bool
	// ConsoleURL is the console's base URL (e.g. "https://reckon.example.com/console") for the
	// evidence links of answers. Default: over HTTP, the console of the server the request came
	// to; over stdio, none (answers link the reckon://effects/{id} resource only).
	ConsoleURL string
	// MaxBodyBytes limits a request body over HTTP; a larger one is refused with 413. Default
	// api.DefaultMaxBodyBytes (1 MiB), as the API's.
	MaxBodyBytes int64
	// Logger receives the gateway's errors. Default slog.Default().
	Logger *slog.Logger
	// Stopping, when closed, ends the sessions' event streams (GET /mcp), which never end by
	// themselves, and cuts short the waits of the calls in flight (they answer that the outcome is
	// being checked), so that MCP clients do not hold up a graceful shutdown: close it when the
	// HTTP server starts to stop. Default nil: streams end when their clients go away.
	Stopping <-chan struct{}
}

// Validate reports what is wrong with the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("mcpgw: Config.Pool is required")
	case c.Effects == nil:
		return errors.New("mcpgw: Config.Effects is required")
	case c.Ops == nil:
		return errors.New("mcpgw: Config.Ops is required")
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("mcpgw: Config.MaxBodyBytes must not be negative, got %d", c.MaxBodyBytes)
	case c.Wait < 0 || c.Wait > MaxWait:
		return fmt.Errorf("mcpgw: Config.Wait %v out of range (0 for the default, up to %v)", c.Wait, MaxWait)
	}
	return nil
}

// Gateway is the MCP server of Reckon's connectors. It is safe for concurrent use.
type Gateway struct {
	config  Config
	effects *effects.Client
	ops     *ops.Ops
	logger  *slog.Logger
	wait    time.Duration
}

// New returns a Gateway.
func New(config *Config) (*Gateway, error) {
	cfg := *config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = api.DefaultMaxBodyBytes
	}
	if cfg.RefreshConnectors == nil {
		cfg.RefreshConnectors = httpconn.Refresher(cfg.Pool, cfg.Effects.Registry())
	}
	return &Gateway{config: cfg, effects: cfg.Effects, ops: cfg.Ops, logger: cfg.Logger, wait: cfg.Wait}, nil
}

// Register mounts the gateway's Streamable HTTP endpoint at Path on mux.
func (g *Gateway) Register(mux *http.ServeMux) {
	mux.Handle(Path, g.Handler())
}

// Handler is the Streamable HTTP endpoint: every request authenticated by a tenant's API token
// (401 without a valid one, 403 for a system token, 503 when the database cannot say), and every
// session bound to the token that opened it (the SDK answers 403 to another token).
func (g *Gateway) Handler() http.Handler {
	streamable := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		token := tokenOf(r.Context())
		if token == nil {
			return nil // not reached: authenticated below
		}
		return g.newServer(token, "", g.consoleURL(r))
	}, &mcp.StreamableHTTPOptions{
		Logger: g.logger, SessionTimeout: time.Hour, MaxRequestBodyBytes: g.config.MaxBodyBytes,
		// The SDK's DNS rebinding protection refuses a request that came to a loopback address
		// with another Host: every request of a server behind a proxy on its host. It protects
		// servers that take requests without credentials; every request here bears a token, which
		// a page that rebinds a name does not have.
		DisableLocalhostProtection: true,
	})
	// The SDK ties a session to TokenInfo.UserID: the token's id.
	bound := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		token := tokenOf(ctx)
		if token == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token.ID.String()}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(stampCalls(streamable, g.config.MaxBodyBytes))
	return g.authenticate(g.endStreamsOnStop(bound))
}

// endStreamsOnStop ends a GET (a session's event stream) when Config.Stopping closes.
func (g *Gateway) endStreamsOnStop(next http.Handler) http.Handler {
	if g.config.Stopping == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-g.config.Stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// stopping reports whether Config.Stopping is closed.
func (g *Gateway) stopping() bool {
	select {
	case <-g.config.Stopping:
		return true
	default:
		return false
	}
}

// ServeStdio serves one MCP session of token over in and out (newline-delimited JSON-RPC, the
// stdio transport) until the client closes in or ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context, token *tenants.Token, in io.ReadCloser, out io.WriteCloser) error {
	if token == nil || token.System || token.TenantID == "" {
		return errors.New("mcpgw: a tenant's token is required (a system token has no tools)")
	}
	// A stdio session has no id of its own: a new one per process.
	server := g.newServer(token, "stdio-"+uuid.Must(uuid.NewV7()).String(), g.config.ConsoleURL)
	transport := &stampingTransport{Transport: &mcp.IOTransport{Reader: in, Writer: out}}
	err := server.Run(ctx, transport)
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

// consoleURL is Config.ConsoleURL, else the console of the server r came to.
func (g *Gateway) consoleURL(r *http.Request) string {
	if g.config.ConsoleURL != "" {
		return g.config.ConsoleURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/console"
}

type tokenKey struct{}

func tokenOf(ctx context.Context) *tenants.Token {
	token, _ := ctx.Value(tokenKey{}).(*tenants.Token)
	return token
}

// authenticate admits requests bearing a live tenant token, with the token in their context.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := tenants.AuthenticateRequest(r.Context(), g.config.Pool, r)
		switch {
		case errors.Is(err, tenants.ErrNoBearer), errors.Is(err, tenants.ErrMalformedBearer), errors.Is(err, tenants.ErrInvalidToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="reckon"`)
			http.Error(w, "a tenant's API token is required: Authorization: Bearer <token> ("+err.Error()+")", http.StatusUnauthorized)
			return
		case err != nil:
			g.logger.WarnContext(r.Context(), "mcp: authenticate", slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the database is unavailable; retry later", http.StatusServiceUnavailable)
			return
		case token.System:
			http.Error(w, "a system token has no tools: use a tenant's token", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, token)))
	})
}

// implementation names the gateway to clients.
func implementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "reckon", Title: "Reckon", Version: version.Read().Version}
}
