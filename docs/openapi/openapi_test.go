package openapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/docs/openapi"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/testkit/openapitest"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// The end-to-end tests of cmd/server/internal/api and effects/httpconn hold their exchanges to
// the documents. What they do not carry is checked here, from the Go types that are sent: the
// events of the stream's data lines, the deliveries of webhook subscriptions and the calls of HTTP
// turn handlers. Every field is set, so that a field added to a type is a field the document must
// name (its objects admit no other).

func TestDocumentsValid(t *testing.T) {
	t.Parallel()
	api := openapitest.Load(t, openapi.API)
	connector := openapitest.Load(t, openapi.Connector)
	if api.OpenAPI != "3.1.0" || connector.OpenAPI != "3.1.0" {
		t.Fatalf("want OpenAPI 3.1.0 documents, got %s and %s", api.OpenAPI, connector.OpenAPI)
	}
}

// event is an event with every field set.
func event() events.Event {
	id := uuid.New()
	return events.Event{
		ID: events.ID{XID: 7813, Seq: 20398}, Type: "turn.completed", Tenant: "acme", SessionKey: "acme:bot:u7:web",
		TurnID: &id, EffectID: &id, SagaID: &id, RunID: "run-7", Payload: json.RawMessage(`{"seq":1}`),
		At: time.Now().UTC(),
	}
}

// TestEventStreamData: the data line of an event stream (GET /v1/events) is an Event of the API.
func TestEventStreamData(t *testing.T) {
	t.Parallel()
	openapitest.RequireSchema(t, openapitest.Load(t, openapi.API), "Event", event())
}

// TestSubscriptionDelivery: a webhook subscription's delivery and its signature header.
func TestSubscriptionDelivery(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t, openapi.Connector)
	delivery := events.Delivery{SubscriptionID: uuid.New(), DeliveryID: "reckon.webhook/…/7813-20398..7813-20398/r0",
		Events: []events.Event{event()}}
	openapitest.RequireSchema(t, doc, "Delivery", delivery)

	body, err := json.Marshal(delivery)
	if err != nil {
		t.Fatal(err)
	}
	signature := events.Sign("a secret of sixteen bytes", time.Now(), body)
	for _, p := range doc.Webhooks["subscriptionDelivery"].Post.Parameters {
		if p.Value.Name != events.HeaderSignature {
			continue
		}
		if err := p.Value.Schema.Value.VisitJSON(signature); err != nil {
			t.Errorf("%s %q does not match the document: %v", events.HeaderSignature, signature, err)
		}
		return
	}
	t.Errorf("the subscriptionDelivery webhook has no %s header", events.HeaderSignature)
}

// TestTurnHandlerCall: the request an HTTP turn handler receives, and its answer.
func TestTurnHandlerCall(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t, openapi.Connector)
	id, now := uuid.New(), time.Now().UTC()
	artifact := httpturn.Artifact{Name: "plan", Data: json.RawMessage(`{"steps":2}`), InputFingerprint: "sha256:ab",
		DependencyFingerprint: "v3", Policy: "CONDITIONAL"}
	request := httpturn.Request{
		SessionKey: "acme:bot:u7:web", Tenant: "acme", Channel: "web", TurnID: id, TurnGroup: id, Seq: 3, Attempt: 1,
		Messages:  []httpturn.Message{{ID: id, MessageID: "wamid.1", Content: json.RawMessage(`{"text":"hi"}`), ReceivedAt: now, SentAt: &now}},
		Artifacts: []httpturn.StoredArtifact{{Artifact: artifact, TurnID: id, SavedAt: now}},
	}
	openapitest.RequireSchema(t, doc, "TurnRequest", request)

	zero, one := 0, 1
	answer := httpturn.Response{
		Effects: []httpturn.Effect{{Connector: "bank.wire", Args: json.RawMessage(`{"amount":1}`), Decision: &zero,
			CallIndex: &one, BusinessKey: "acc-1:1"}},
		Artifacts: []httpturn.Artifact{artifact},
		Reused:    []string{"summary"},
	}
	openapitest.RequireSchema(t, doc, "TurnAnswer", answer)
}
