package console

import (
	"github.com/reckonhq/reckon/schedule"
)

// scheduleListData is the Schedules page: a page of the schedules in scope, by tenant and name.
type scheduleListData struct {
	Schedules []*schedule.Schedule
	Next      string
}

// scheduleList is GET /console/schedules: the schedules the operator sees, with their next tick
// and the effect of their last tick.
func (c *Console) scheduleList(req *request) error {
	list, next, err := c.ops.Schedules(req.ctx(), req.scope, "", listPageSize, req.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	data := scheduleListData{Schedules: list}
	if next != "" {
		data.Next = withQuery(req, "after", next)
	}
	return c.page(req, "schedules", "Schedules", data)
}
