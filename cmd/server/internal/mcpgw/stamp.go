package mcpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callIDMeta is the _meta key under which the gateway stamps every tools/call request with its
// JSON-RPC request id before the SDK reads it: the SDK does not show a tool handler the id, and
// the id is the call's position in its session (idempotency keys, doc.go). A value the client put
// there is replaced.
const callIDMeta = "reckon/call_id"

// stampCalls stamps the tools/call requests of a POST body (one message or a batch) of at most
// maxBody bytes; a larger body goes to the SDK as it is, which refuses it (413).
func stampCalls(next http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if int64(len(body)) <= maxBody {
			body = stampBody(body)
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		r.ContentLength = -1
		r.Header.Del("Content-Length")
		next.ServeHTTP(w, r)
	})
}

// stampBody stamps a JSON-RPC message or batch; anything it cannot read is left as it is for the
// SDK to refuse.
func stampBody(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return body
		}
		for i, msg := range batch {
			batch[i] = stampMessage(msg)
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return body
		}
		return out
	}
	return stampMessage(body)
}

// stampMessage stamps one JSON-RPC message if it is a tools/call request.
func stampMessage(raw []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(raw, &msg) != nil {
		return raw
	}
	var method string
	id, hasID := msg["id"]
	if !hasID || json.Unmarshal(msg["method"], &method) != nil || method != "tools/call" {
		return raw
	}
	params, ok := stampParams(msg["params"], id)
	if !ok {
		return raw
	}
	msg["params"] = params
	out, err := json.Marshal(msg)
	if err != nil {
		return raw
	}
	return out
}

// stampParams sets params._meta[callIDMeta] to the request id (its JSON text, as a string).
func stampParams(params json.RawMessage, id json.RawMessage) (json.RawMessage, bool) {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(params)) > 0 && json.Unmarshal(params, &fields) != nil {
		return nil, false
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := fields["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return nil, false
	}
	idText, err := json.Marshal(string(bytes.TrimSpace(id)))
	if err != nil {
		return nil, false
	}
	meta[callIDMeta] = idText
	if fields["_meta"], err = json.Marshal(meta); err != nil {
		return nil, false
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, false
	}
	return out, true
}

// stampingTransport stamps the tools/call requests read from a transport (stdio).
type stampingTransport struct{ mcp.Transport }

// Connect connects the transport and stamps what its connection reads.
func (t *stampingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &stampingConn{Connection: conn}, nil
}

type stampingConn struct{ mcp.Connection }

// Read reads a message, stamped if it is a tools/call request.
func (c *stampingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" && req.ID.IsValid() {
		if id, err := json.Marshal(req.ID.Raw()); err == nil {
			if params, ok := stampParams(req.Params, id); ok {
				req.Params = params
			}
		}
	}
	return msg, err
}
