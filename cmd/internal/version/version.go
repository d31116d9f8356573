// Package version says what a binary was built from, as the Go toolchain recorded it
// (runtime/debug.ReadBuildInfo): the module's version, the VCS commit and its time, and the Go
// version and platform. `server version`, `reactor version` and their -version flag print it
// (Print); reckon_build_info's labels come from it too (health.Version).
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a binary was built from.
type Info struct {
	// Version is the main module's version: a tag or pseudo-version when built with `go install
	// module@version` (or from a checkout with VCS stamping), "(devel)" when built from a checkout
	// without, "unknown" when the binary has no build information.
	Version string `json:"version"`
	// Revision is the VCS commit in full; empty when the build recorded none (-buildvcs=false, or
	// not built from a checkout).
	Revision string `json:"revision,omitempty"`
	// Modified: the checkout had changes not committed.
	Modified bool `json:"modified"`
	// Time is the commit's time, RFC 3339 as the VCS gives it; empty when not recorded.
	Time string `json:"time,omitempty"`
	// GoVersion is the Go toolchain that built the binary, e.g. "go1.26.1".
	GoVersion string `json:"go_version"`
	// OS and Arch are the platform built for (GOOS, GOARCH).
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// Read returns this binary's Info.
func Read() Info {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	}
	return FromBuildInfo(info)
}

// FromBuildInfo returns the Info of info: its main module's version (or "unknown"), and the vcs.*,
// GOOS and GOARCH build settings. What info lacks of the platform and Go version is this
// process's.
func FromBuildInfo(info *debug.BuildInfo) Info {
	v := Info{Version: info.Main.Version, GoVersion: info.GoVersion, OS: runtime.GOOS, Arch: runtime.GOARCH}
	if v.Version == "" {
		v.Version = "unknown"
	}
	if v.GoVersion == "" {
		v.GoVersion = runtime.Version()
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "vcs.time":
			v.Time = s.Value
		case "GOOS":
			v.OS = s.Value
		case "GOARCH":
			v.Arch = s.Value
		}
	}
	return v
}

// Commit is the revision shortened to 12 characters, with "-dirty" when the checkout had changes;
// empty when the build recorded no revision.
func (v Info) Commit() string {
	if v.Revision == "" {
		return ""
	}
	commit := v.Revision
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if v.Modified {
		commit += "-dirty"
	}
	return commit
}

// Line is the one-line form, naming the binary: "reckon server v1.2.3 (commit 0123456789ab,
// 2026-11-24T10:00:00Z, go1.26.1 linux/amd64)". What the build did not record is left out:
// "reckon server (devel) (go1.26.1 linux/amd64)".
func (v Info) Line(binary string) string {
	var details []string
	if commit := v.Commit(); commit != "" {
		details = append(details, "commit "+commit)
	}
	if v.Time != "" {
		details = append(details, v.Time)
	}
	details = append(details, v.GoVersion+" "+v.OS+"/"+v.Arch)
	return fmt.Sprintf("reckon %s %s (%s)", binary, v.Version, strings.Join(details, ", "))
}

// Print writes this binary's Info to w as output asks (Info.Print): what `server version`,
// `reactor version` and -version print.
func Print(w io.Writer, binary, output string) error {
	return Read().Print(w, binary, output)
}

// Print writes v to w as output asks: "text", the Line naming binary, or "json", one indented
// object of Info's fields plus "name" ("reckon server") and "commit" (Commit). Any other output
// is an error naming the -o flag, and nothing is written.
func (v Info) Print(w io.Writer, binary, output string) error {
	switch output {
	case "text":
		_, err := fmt.Fprintln(w, v.Line(binary))
		return err
	case "json":
		out := struct {
			Name string `json:"name"`
			Info
			Commit string `json:"commit,omitempty"`
		}{Name: "reckon " + binary, Info: v, Commit: v.Commit()}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	default:
		return fmt.Errorf("-o %q: want text or json", output)
	}
}
