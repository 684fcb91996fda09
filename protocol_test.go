package main

import (
	"runtime/debug"
	"testing"
)

func TestMethodsAgreeWithTheCatalogKinds(t *testing.T) {
	for k := range numKinds {
		list, changed := kinds[k].list, kinds[k].changed
		if info := methods[list]; info.op != opList || info.kind != k || !info.cacheable {
			t.Errorf("methods[%q] = %+v, want opList of kind %d, cacheable", list, info, k)
		}
		if info := methods[changed]; info.from != fromServer || !info.notification {
			t.Errorf("methods[%q] = %+v, want a notification from servers", changed, info)
		}
	}
}

func TestServedDependsOnTheEra(t *testing.T) {
	tests := []struct {
		method string
		era    era
		want   op
	}{
		{"initialize", eraLegacy, opInitialize},
		{"initialize", eraModern, opNone},
		{"server/discover", eraModern, opDiscover},
		{"server/discover", eraLegacy, opNone},
		{"tools/call", eraLegacy, opForward},
		{"tools/call", eraModern, opForward},
		{"subscriptions/listen", eraLegacy, opNone},
		{"resources/subscribe", eraModern, opNone},
		{"notifications/initialized", eraLegacy, opNone}, // a notification is not a request
		{"sampling/createMessage", eraLegacy, opNone},    // a server's request, not a client's
		{"no/such/method", eraLegacy, opNone},
	}
	for _, tt := range tests {
		if got := served(tt.method, tt.era).op; got != tt.want {
			t.Errorf("served(%q, %d).op = %d, want %d", tt.method, tt.era, got, tt.want)
		}
	}
}

func TestForwardedRequestsHaveARoutingMember(t *testing.T) {
	for name, info := range methods {
		if info.op == opForward && info.member == "" {
			t.Errorf("methods[%q] is forwarded but has no routing member", name)
		}
		// Mcp-Name holds a tool's or prompt's name, a resource's URI, or
		// (the tasks extension's methods) a task's ID.
		if info.mcpName && info.member != routeName && info.member != routeURI && !(info.op == opTask && info.member == "taskId") {
			t.Errorf("methods[%q] puts its routing member %q in Mcp-Name, which holds a name, a URI or a task's ID", name, info.member)
		}
	}
}

func TestHeardServesOnlyClientNotifications(t *testing.T) {
	tests := []struct {
		method string
		want   op
	}{
		{"notifications/cancelled", opCancel},
		{"notifications/initialized", opAcknowledged},
		{"notifications/progress", opNone},           // a client's progress is ignored
		{"notifications/tools/list_changed", opNone}, // a server's notification
		{"tools/call", opNone},                       // a request, not a notification
		{"no/such/method", opNone},
	}
	for _, tt := range tests {
		if got := heard(tt.method).op; got != tt.want {
			t.Errorf("heard(%q).op = %d, want %d", tt.method, got, tt.want)
		}
	}
}

func TestVersionComesFromTheBuild(t *testing.T) {
	t.Parallel()
	rev := "72272da5c8e1f00dfeedface0000000000000000"
	tests := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install module@version reports the module's version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true, "v1.2.3"},
		{"go build in a repository reports the version it derived", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261125204213-72272da5c8e1+dirty"}}, true, "v0.0.0-20261125204213-72272da5c8e1+dirty"},
		{"a build with no version reports the revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, true, "72272da5c8e1"},
		{"a tree with changes is marked dirty", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, true, "72272da5c8e1+dirty"},
		{"a build with neither is devel", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel"},
		{"a binary without build information is devel", nil, false, "devel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.info, tc.ok); got != tc.want {
				t.Errorf("versionOf(...) = %q, want %q", got, tc.want)
			}
		})
	}
}
