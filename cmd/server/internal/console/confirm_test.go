package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/effects"
)

// hold is an effect's confirmation hold as the database keeps it.
type hold struct {
	state, confirmation, by, reason string
}

func (h *harness) hold(id uuid.UUID) hold {
	h.t.Helper()
	var out hold
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT state::text, coalesce(confirmation, ''),
		coalesce(confirmation_by, ''), coalesce(confirmation_reason, '') FROM reckon_effects WHERE id = $1`, id).
		Scan(&out.state, &out.confirmation, &out.by, &out.reason))
	return out
}

// The effects awaiting their confirmation: listed oldest first with their prompts (escaped: they
// are rendered from the args) and ages, counted on the overview, marked in the effects list, and
// confirmed or declined from their page with a reason; the decision is then on the page.
func TestConfirmationHolds(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	hostile := `<script>alert(1)</script> & "Mallory"`
	older := h.held("acme", "refund-old", hostile, "")
	newer := h.held("acme", "refund-new", "acct-9", "")
	plain := h.enqueue("acme", "wire-plain", nil)
	_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET created_at = now() - interval '3 hours' WHERE id = $1`, older.ID)
	require.NoError(t, err)
	b := h.signedIn("ann", operator.RoleOperator)

	// The list: both, oldest first, with prompt and age; never the effect that is not held.
	p := b.get("/console/awaiting")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "<strong>2</strong> effects await their confirmation")
	first, second := strings.Index(p.body, older.ID.String()), strings.Index(p.body, newer.ID.String())
	require.Positive(t, first)
	require.Greater(t, second, first, "oldest first")
	require.Contains(t, p.body, `Wire 250 to &lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;Mallory&#34;?`)
	require.NotContains(t, p.body, "<script>alert(1)")
	require.Contains(t, p.body, "Wire 250 to acct-9?")
	require.Regexp(t, `3h0\dm <span class="note">since`, p.body, "the oldest's age")
	require.NotContains(t, p.body, plain.ID.String())

	// The overview counts them, with the oldest one's age, apart from the queue's lag.
	p = b.get("/console/overview")
	require.Regexp(t, `Awaiting confirmation</span><a class="value" href="/console/awaiting">2</a><span class="note">oldest waiting 3h0\dm`, p.body)
	require.Contains(t, p.body, "not counting those awaiting confirmation")

	// The effects list marks them.
	p = b.get("/console/effects?tenant=acme")
	require.Equal(t, 2, strings.Count(p.body, "awaiting confirmation</span>"), "the two held effects, not the plain one")

	// An awaiting effect's page: the prompt, who enqueued it, its expiry, Confirm and Decline with
	// a labelled reason each, and no Cancel (Decline is that).
	page := "/console/effects/" + older.ID.String()
	p = b.get(page)
	require.Equal(t, http.StatusOK, p.status)
	for _, want := range []string{
		`<p class="prompt">Wire 250 to &lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;Mallory&#34;?</p>`,
		"<dt>Enqueued by</dt><dd>enqueue at", "<dt>Expires</dt><dd>never</dd>", "awaiting confirmation",
		`action="/console/effects/` + older.ID.String() + `/confirm"`, `<label for="confirm-reason">`,
		`action="/console/effects/` + older.ID.String() + `/decline"`, `<label for="decline-reason">`,
	} {
		require.Contains(t, p.body, want)
	}
	require.NotContains(t, p.body, "<script>alert(1)")
	require.NotContains(t, p.body, `/cancel"`)
	require.Contains(t, b.get("/console/effects/"+plain.ID.String()).body, `/cancel"`, "a plain PENDING effect keeps Cancel")

	// Confirmed: recorded with the operator and reason, shown on the page, no form left.
	p = b.post(page+"/confirm", url.Values{"reason": {"the customer called back"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, page+"?done=confirmed", p.location())
	require.Equal(t, hold{"PENDING", "CONFIRMED", "operator:console:ann", "the customer called back"}, h.hold(older.ID))
	p = b.get(p.location())
	require.Contains(t, p.body, "Confirmed: the effect is dispatched")
	require.Regexp(t, `<dt>Decided</dt><dd>[0-9-]+ [0-9:]+Z by <strong>operator:console:ann</strong></dd>`, p.body)
	require.Contains(t, p.body, `<dd class="reason">the customer called back</dd>`)
	require.Contains(t, p.body, "confirmed by a person")
	require.NotContains(t, p.body, `/confirm"`)
	require.NotContains(t, p.body, `/decline"`)

	// Deciding again: a 409 that says why, nothing recorded.
	before := h.transitions()
	for _, action := range []string{"confirm", "decline"} {
		p = b.post(page+"/"+action, url.Values{"reason": {"again"}})
		require.Equal(t, http.StatusConflict, p.status, p.body)
		require.Contains(t, p.body, "does not await a confirmation (any more)")
	}
	require.Equal(t, before, h.transitions())

	// Declined: FAILED, with the decision on the page.
	p = b.post("/console/effects/"+newer.ID.String()+"/decline", url.Values{"reason": {"not authorised"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, hold{"FAILED", "DECLINED", "operator:console:ann", "not authorised"}, h.hold(newer.ID))
	p = b.get(p.location())
	require.Contains(t, p.body, "Declined: the effect is FAILED")
	require.Contains(t, p.body, `<span class="hold hold-DECLINED">declined</span>`)
	require.Contains(t, p.body, `<dd class="reason">not authorised</dd>`)
	require.Contains(t, p.body, "declined: not authorised", "the timeline's row")

	// None left.
	p = b.get("/console/awaiting")
	require.Contains(t, p.body, "No effect awaits a confirmation.")
	require.Contains(t, b.get("/console/overview").body, `href="/console/awaiting">0</a><span class="note">none waiting`)
}

// Four eyes: an operator cannot confirm an effect enqueued as itself (a 409 that says so, nothing
// recorded) but may decline it; another operator confirms it. A hold with an expiry shows it.
func TestConfirmationFourEyes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	mine := h.held("acme", "refund-mine", "acct-1", "operator:console:ann")
	declined := h.held("acme", "refund-mine-2", "acct-2", "operator:console:ann")
	ann := h.signedIn("ann", operator.RoleOperator)
	page := "/console/effects/" + mine.ID.String()
	require.Contains(t, ann.get(page).body, "<dt>Enqueued by</dt><dd>operator:console:ann at")

	before := h.transitions()
	p := ann.post(page+"/confirm", url.Values{"reason": {"looks right to me"}})
	require.Equal(t, http.StatusConflict, p.status, p.body)
	require.Contains(t, p.body, "Four eyes: this effect was enqueued by you (operator:console:ann), so someone else must confirm it.")
	require.Equal(t, hold{"PENDING", "AWAITING", "", ""}, h.hold(mine.ID))
	require.Equal(t, before, h.transitions())

	p = ann.post("/console/effects/"+declined.ID.String()+"/decline", url.Values{"reason": {"changed my mind"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "DECLINED", h.hold(declined.ID).confirmation)

	bob := h.signedIn("bob", operator.RoleOperator)
	p = bob.post(page+"/confirm", url.Values{"reason": {"second pair of eyes"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, hold{"PENDING", "CONFIRMED", "operator:console:bob", "second pair of eyes"}, h.hold(mine.ID))

	// An expiry: when, and how long is left.
	expiring, err := h.effects.Enqueue(context.Background(), effects.Spec{TenantID: "acme", Connector: "bank.wire",
		IdempotencyKey: "refund-ttl", Args: map[string]any{"amount": 1, "to": "x"}, RequireConfirmation: true,
		ConfirmationTTL: 2 * time.Hour}, nil)
	require.NoError(t, err)
	p = bob.get("/console/effects/" + expiring.ID.String())
	require.Regexp(t, `<dt>Expires</dt><dd>[0-9-]+ [0-9:]+Z \(in 1h5\dm; then FAILED\)</dd>`, p.body)
	require.Regexp(t, `in 1h5\dm</td>`, bob.get("/console/awaiting").body)
}

// A decision's reason is required, UTF-8 without NUL and at most 1000 bytes; a bad one is a 400
// naming the field, and nothing changes. A viewer sees the hold but no form, and its POSTs are 403.
func TestConfirmationBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	e := h.held("acme", "refund-1", "acct-1", "")
	b := h.signedIn("ann", operator.RoleOperator)
	before := h.transitions()
	for _, action := range []string{"confirm", "decline"} {
		for name, reason := range map[string]string{
			"none": "", "blank": "  ", "NUL": "a\x00b", "bad UTF-8": "\xff\xfe", "over 1000 bytes": strings.Repeat("x", 1001),
			"over the form's 2048 bytes": strings.Repeat("é", 1500),
		} {
			p := b.post("/console/effects/"+e.ID.String()+"/"+action, url.Values{"reason": {reason}})
			require.Equal(t, http.StatusBadRequest, p.status, "%s %s: %s", action, name, p.body)
			require.Contains(t, p.body, "<strong>reason</strong>", "%s %s", action, name)
		}
		p := b.post("/console/effects/not-an-id/"+action, url.Values{"reason": {"x"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.body, "<strong>id</strong>")
		require.Equal(t, http.StatusNotFound, b.post("/console/effects/"+uuid.NewString()+"/"+action, url.Values{"reason": {"x"}}).status)
	}
	require.Equal(t, hold{"PENDING", "AWAITING", "", ""}, h.hold(e.ID))
	require.Equal(t, before, h.transitions())

	viewer := h.signedIn("vic", operator.RoleViewer)
	p := viewer.get("/console/effects/" + e.ID.String())
	require.Contains(t, p.body, `<p class="prompt">Wire 250 to acct-1?</p>`)
	require.NotRegexp(t, regexp.MustCompile(`/(confirm|decline)"`), p.body)
	for _, action := range []string{"confirm", "decline"} {
		require.Equal(t, http.StatusForbidden, viewer.post("/console/effects/"+e.ID.String()+"/"+action, url.Values{"reason": {"x"}}).status)
	}
	require.Equal(t, hold{"PENDING", "AWAITING", "", ""}, h.hold(e.ID))
}
