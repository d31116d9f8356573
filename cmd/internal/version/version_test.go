package version_test

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/internal/version"
)

// TestLine: the one-line form from constructed build information — a release, a dirty checkout,
// a build that recorded no VCS data, and one that recorded nothing at all.
func TestLine(t *testing.T) {
	t.Parallel()
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{
			name: "release",
			info: debug.BuildInfo{
				GoVersion: "go1.26.1",
				Main:      debug.Module{Path: "github.com/reckonhq/reckon", Version: "v1.2.3"},
				Settings: settings("GOOS", "linux", "GOARCH", "amd64", "vcs", "git",
					"vcs.revision", "abc123def4567890abc123def4567890abc123de", "vcs.time", "2026-11-24T10:00:00Z", "vcs.modified", "false"),
			},
			want: "reckon server v1.2.3 (commit abc123def456, 2026-11-24T10:00:00Z, go1.26.1 linux/amd64)",
		},
		{
			name: "dirty checkout",
			info: debug.BuildInfo{
				GoVersion: "go1.26.1",
				Main:      debug.Module{Version: "v0.0.0-20261124100000-abc123def456+dirty"},
				Settings: settings("GOOS", "darwin", "GOARCH", "arm64",
					"vcs.revision", "abc123def4567890abc123def4567890abc123de", "vcs.time", "2026-11-24T10:00:00Z", "vcs.modified", "true"),
			},
			want: "reckon server v0.0.0-20261124100000-abc123def456+dirty (commit abc123def456-dirty, 2026-11-24T10:00:00Z, go1.26.1 darwin/arm64)",
		},
		{
			name: "no VCS data",
			info: debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: settings("GOOS", "linux", "GOARCH", "arm64")},
			want: "reckon server (devel) (go1.26.1 linux/arm64)",
		},
		{
			name: "short revision",
			info: debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: settings("GOOS", "linux", "GOARCH", "amd64", "vcs.revision", "abc123")},
			want: "reckon server (devel) (commit abc123, go1.26.1 linux/amd64)",
		},
		{
			name: "nothing recorded",
			info: debug.BuildInfo{},
			want: "reckon server unknown (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, version.FromBuildInfo(&tc.info).Line("server"))
		})
	}
}

// TestPrint: text is the line; json is one object with the full revision, the short commit and the
// binary's name; another output is refused with nothing written.
func TestPrint(t *testing.T) {
	t.Parallel()
	info := version.FromBuildInfo(&debug.BuildInfo{
		GoVersion: "go1.26.1",
		Main:      debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"},
			{Key: "vcs.revision", Value: "abc123def4567890abc123def4567890abc123de"},
			{Key: "vcs.time", Value: "2026-11-24T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	})

	var text bytes.Buffer
	require.NoError(t, info.Print(&text, "reactor", "text"))
	require.Equal(t, "reckon reactor v1.2.3 (commit abc123def456-dirty, 2026-11-24T10:00:00Z, go1.26.1 linux/amd64)\n", text.String())

	var out bytes.Buffer
	require.NoError(t, info.Print(&out, "reactor", "json"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Equal(t, map[string]any{
		"name": "reckon reactor", "version": "v1.2.3", "revision": "abc123def4567890abc123def4567890abc123de",
		"commit": "abc123def456-dirty", "modified": true, "time": "2026-11-24T10:00:00Z",
		"go_version": "go1.26.1", "os": "linux", "arch": "amd64",
	}, got)

	var refused bytes.Buffer
	require.EqualError(t, info.Print(&refused, "reactor", "yaml"), `-o "yaml": want text or json`)
	require.Empty(t, refused.String())
}

// TestRead: this test binary's own information has its Go version and platform.
func TestRead(t *testing.T) {
	t.Parallel()
	info := version.Read()
	require.Equal(t, runtime.Version(), info.GoVersion)
	require.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, info.OS+"/"+info.Arch)
	require.NotEmpty(t, info.Version)
}
