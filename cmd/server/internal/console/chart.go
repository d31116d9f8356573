package console

import (
	"fmt"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
)

// Chart geometry, in SVG user units.
const (
	chartHeight = 120
	barWidth    = 10
	chartGap    = 2
)

// chart is the overview's settled-per-minute bar chart, drawn by the template as inline SVG
// (no script): one stacked bar per minute, CONFIRMED below FAILED.
type chart struct {
	Width, Height int
	Max           int64
	Bars          []chartBar
	Confirmed     int64
	Failed        int64
}

type chartBar struct {
	X                      int
	ConfirmedY, ConfirmedH int
	FailedY, FailedH       int
	Label                  string
	Minute                 time.Time
	Confirmed, Failed      int64
}

func newChart(minutes []ops.MinuteCount) chart {
	c := chart{Width: len(minutes) * (barWidth + chartGap), Height: chartHeight}
	for _, m := range minutes {
		c.Max = max(c.Max, m.Confirmed+m.Failed)
		c.Confirmed += m.Confirmed
		c.Failed += m.Failed
	}
	scale := func(n int64) int {
		if c.Max == 0 || n == 0 {
			return 0
		}
		return max(1, int(n*chartHeight/c.Max))
	}
	for i, m := range minutes {
		confirmed, failed := scale(m.Confirmed), scale(m.Failed)
		c.Bars = append(c.Bars, chartBar{
			X:          i * (barWidth + chartGap),
			ConfirmedY: chartHeight - confirmed, ConfirmedH: confirmed,
			FailedY: chartHeight - confirmed - failed, FailedH: failed,
			Label:  fmt.Sprintf("%s: %d confirmed, %d failed", m.Minute.UTC().Format("15:04"), m.Confirmed, m.Failed),
			Minute: m.Minute, Confirmed: m.Confirmed, Failed: m.Failed,
		})
	}
	return c
}
