package console

import (
	"net/url"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
)

// maxOperatorNameBytes bounds an operator's name (operator names are 1 to 64 characters).
const maxOperatorNameBytes = 64

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
	if name := req.URL.Query().Get("revoked"); name != "" {
		data.Notice = "Revoked " + name + "; its sessions are over."
	}
	return c.page(req, "operators", "Operators", data)
}

// revokeOperator revokes an operator and ends its sessions (admins only).
func (c *Console) revokeOperator(req *request) error {
	name := req.PathValue("name")
	if name == "" || len(name) > maxOperatorNameBytes {
		return badField("name", "want 1 to %d characters", maxOperatorNameBytes)
	}
	if _, err := c.operators.Revoke(req.ctx(), name); err != nil {
		return err
	}
	return req.redirect("/console/operators?" + url.Values{"revoked": {name}}.Encode())
}
