package health

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/cmd/internal/version"
)

// Version returns what this binary was built from (version.Read): the main module's version
// ("(devel)" for a build from a checkout), the VCS revision in full (with "-dirty" when the tree
// had changes) and the Go version; "unknown" for what the build did not record.
// reckon_build_info's labels and the traces' service.version come from it.
func Version() (moduleVersion, revision, goVersion string) {
	info := version.Read()
	revision = "unknown"
	if info.Revision != "" {
		revision = info.Revision
		if info.Modified {
			revision += "-dirty"
		}
	}
	return info.Version, revision, info.GoVersion
}

// BuildInfo returns the collector of reckon_build_info{version,revision,goversion}, always 1, with
// the labels of Version. Both binaries' registries have it (NewRegistry).
func BuildInfo() prometheus.Collector {
	moduleVersion, revision, goVersion := Version()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "reckon", Name: "build_info",
		Help:        "Always 1: the version, VCS revision and Go version this binary was built from.",
		ConstLabels: prometheus.Labels{"version": moduleVersion, "revision": revision, "goversion": goVersion},
	}, func() float64 { return 1 })
}
