package definitions

import "github.com/prometheus/client_golang/prometheus"

// metrics are a Loader's: how many HTTP connectors it loaded, and its reloads by result.
type metrics struct {
	syncs  *prometheus.CounterVec
	loaded prometheus.Gauge
}

// newMetrics registers a Loader's metrics with registerer, as reckon_<subsystem>_….
func newMetrics(registerer prometheus.Registerer, subsystem string) (*metrics, error) {
	m := &metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: subsystem, Name: "connector_syncs_total",
			Help: "Reloads of the HTTP connectors from the database, by result (ok, error).",
		}, []string{"result"}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "reckon", Subsystem: subsystem, Name: "http_connectors",
			Help: "HTTP connectors registered in this " + subsystem + ".",
		}),
	}
	for _, result := range []string{"ok", "error"} {
		m.syncs.WithLabelValues(result) // at 0 until the first sync, for alerts on rate()
	}
	for _, c := range []prometheus.Collector{m.syncs, m.loaded} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
