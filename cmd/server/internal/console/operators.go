package console

import (
	"net/url"
	"slices"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
)

type operatorListData struct {
	Operators []*operator.Operator
	Notice    string
}

// operatorList lists every operator, revoked ones included (admins only).
func (c *Console) operatorList(req *request) error {
	list, err := c.operators.List(req.ctx())
	if err != nil {
		return err
	}
	data := operatorListData{Operators: list}
	// The notice of a revocation (the revoke form's redirect), only of an operator that is revoked:
	// a link cannot make the page say something that did not happen.
	if name := req.URL.Query().Get("revoked"); slices.ContainsFunc(list, func(op *operator.Operator) bool {
		return op.Name == name && op.RevokedAt != nil
	}) {
		data.Notice = "Revoked " + name + "; its sessions are over."
	}
	return c.page(req, "operators", "Operators", data)
}

// revokeOperator revokes an operator and ends its sessions (admins only).
func (c *Console) revokeOperator(req *request) error {
	name := req.PathValue("name")
	if operator.CheckName(name) != nil {
		return badField("name", "want 1 to 64 letters, digits, '.', '_', '@' or '-'")
	}
	if _, err := c.operators.Revoke(req.ctx(), name); err != nil {
		return err
	}
	return req.redirect("/console/operators?" + url.Values{"revoked": {name}}.Encode())
}
