package definitions

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/internal/metric"
)

// metrics are a Loader's: how many HTTP connectors it loaded, and its reloads by result.
type metrics struct {
	syncs  *prometheus.CounterVec
	loaded prometheus.Gauge
}

// newMetrics registers a Loader's metrics with registerer, as reckon_<subsystem>_….
func newMetrics(registerer prometheus.Registerer, subsystem string) (*metrics, error) {
	m := &metrics{
		syncs: metric.CounterVec("reckon_"+subsystem+"_connector_syncs_total",
			"Reloads of the HTTP connectors from the database, by result (ok, error).", "result"),
		loaded: metric.Gauge("reckon_"+subsystem+"_http_connectors", "HTTP connectors registered in this "+subsystem+"."),
	}
	for _, result := range []string{"ok", "error"} {
		m.syncs.WithLabelValues(result) // at 0 until the first sync, for alerts on rate()
	}
	if err := metric.Register(registerer, m.syncs, m.loaded); err != nil {
		return nil, err
	}
	return m, nil
}
