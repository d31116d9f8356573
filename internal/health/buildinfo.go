package health

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version returns what this binary was built from, by runtime/debug.ReadBuildInfo: the main
// module's version ("(devel)" for a build from a checkout), the VCS revision (with "-dirty" when
// the tree had changes) and the Go version; "unknown" for what the build did not record.
// reckon_build_info's labels and the traces' service.version come from it.
func Version() (version, revision, goVersion string) {
	version, revision, goVersion = "unknown", "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && revision != "unknown" {
			revision += "-dirty"
		}
	}
	return version, revision, goVersion
}

// BuildInfo returns the collector of reckon_build_info{version,revision,goversion}, always 1, with
// the labels of Version. Both binaries' registries have it (NewRegistry).
func BuildInfo() prometheus.Collector {
	version, revision, goVersion := Version()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "reckon", Name: "build_info",
		Help:        "Always 1: the version, VCS revision and Go version this binary was built from.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	}, func() float64 { return 1 })
}
