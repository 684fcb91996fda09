package main

import (
	"encoding/json"
	"runtime/debug"
	"strings"
)

// What corral knows of the Model Context Protocol, in one place: every
// method it handles or passes on, every JSON-RPC error code it answers with,
// and every _meta key it reads or writes. The router, the modern era and the
// upstream client read these tables instead of deciding again by name.
//
// The tables are written once, here, and never changed: they are safe to
// read from any goroutine.

// JSON-RPC error codes corral answers with. The first five are JSON-RPC's
// own. The others are in the range JSON-RPC leaves to servers: -32000 and
// -32001 with the meanings the official TypeScript SDK gives them, -32002 as
// MCP defines it, and -32020 to -32022 as MCP 2026-07-28 defines them.
const (
	codeParseError     = -32700 // the message is not JSON
	codeInvalidRequest = -32600 // JSON, but not a JSON-RPC request corral accepts (a batch, a reused ID)
	codeMethodNotFound = -32601 // the method is not served (in this era, or by this server)
	codeInvalidParams  = -32602 // the params lack what the method needs, or name nothing known
	codeInternalError  = -32603 // corral failed, or the request was cancelled

	codeUnavailable      = -32000 // the server is not running, has exited, or is too busy
	codeTimeout          = -32001 // the server did not answer in time
	codeResourceNotFound = -32002 // MCP: a resource that does not exist

	codeHeaderMismatch     = -32020 // 2026-07-28: an HTTP header disagrees with the body
	codeMissingCapability  = -32021 // 2026-07-28: the client did not declare a capability the request needs
	codeUnsupportedVersion = -32022 // 2026-07-28: the protocol version is not served
)

// tasksExtension names the tasks extension of 2026-07-28 in a
// capabilities' "extensions".
const tasksExtension = "io.modelcontextprotocol/tasks"

// The _meta keys corral reads or writes. progressToken is MCP's since its
// first version; the io.modelcontextprotocol/ ones are the 2026-07-28 era's,
// which carries in every request what a legacy session learned once at
// initialize.
const (
	metaProgressToken = "progressToken" // a request's token, echoed by the progress notifications for it

	metaVersion        = "io.modelcontextprotocol/protocolVersion"    // a request's protocol version: it makes the request modern
	metaCaps           = "io.modelcontextprotocol/clientCapabilities" // what the client offers (sampling, elicitation, roots)
	metaClientInfo     = "io.modelcontextprotocol/clientInfo"         // the client's name and version
	metaLogLevel       = "io.modelcontextprotocol/logLevel"           // the least severe log message the client wants
	metaServerInfo     = "io.modelcontextprotocol/serverInfo"         // the server's name and version, in a result
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"     // the subscriptions/listen request a notification belongs to
	metaRelatedTask    = "io.modelcontextprotocol/related-task"       // 2025-11-25: ties a message to its task; the result of tasks/result carries it

	// W3C Trace Context, unprefixed as SEP-414 (2026-07-28) documents and
	// the OpenTelemetry conventions for MCP used before it.
	metaTraceparent = "traceparent"
	metaTracestate  = "tracestate"
)

// reservedMetaKey reports whether key, a _meta key, has a prefix MCP
// reserves: one whose second label is "modelcontextprotocol" or "mcp"
// ("io.modelcontextprotocol/", "dev.mcp/"). Its meaning is the
// specification's, and so depends on the version a message is in.
func reservedMetaKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	_, rest, ok := strings.Cut(prefix, ".")
	if !ok {
		return false
	}
	second, _, _ := strings.Cut(rest, ".")
	return second == "modelcontextprotocol" || second == "mcp"
}

// legacyMetaKey reports whether a legacy server (2025-11-25 and before) is
// sent key, a member of a request's _meta: every key but those of MCP's
// reserved prefixes that 2025-11-25 does not define. So a 2026-07-28
// request's protocolVersion, clientCapabilities, clientInfo and logLevel
// (and an extension's keys) stay behind, while progressToken, the trace
// context (traceparent, tracestate, baggage: unprefixed names, free in
// every version) and vendors' own keys (com.example/...), which mean the
// same to a server of any version, go on.
func legacyMetaKey(key string) bool {
	return key == metaRelatedTask || !reservedMetaKey(key)
}

// era is a set of protocol eras.
type era uint8

const (
	// eraLegacy is MCP 2024-11-05 to 2025-11-25: a session begins with
	// initialize, and the client's capabilities are known from then on.
	eraLegacy era = 1 << iota
	// eraModern is MCP 2026-07-28: no initialize and no session; every
	// request carries its version and its client's capabilities in _meta.
	eraModern

	eraBoth = eraLegacy | eraModern
)

// sender says which side sends a method.
type sender uint8

const (
	fromClient sender = iota // a client to corral, and corral to a server
	fromServer               // a server to corral, and corral to a client
	fromEither               // either side (cancellation, progress)
)

// op says what corral does with a request or a notification a client sends
// it.
type op uint8

const (
	opNone        op = iota // corral does not serve it: the method is not found
	opInitialize            // corral answers: begins a legacy session
	opPing                  // corral answers: an empty result
	opDiscover              // corral answers: versions, capabilities and instructions
	opList                  // corral answers: a page of the aggregated catalog of kind
	opForward               // forwarded to the one server its routing member names
	opSubscribe             // corral subscribes the session, and the server once for all sessions
	opUnsubscribe           // corral unsubscribes the session, and the server after the last
	opSetLevel              // corral keeps the session's level and sets the servers' to the lowest wanted
	opListen                // corral streams the changes the client asks for until it goes away
	opTask                  // forwarded to the server of the session's task its taskId names (tasks.go)
	opTaskList              // corral lists the session's tasks, each as its server has it now

	opCancel       // a notification: corral cancels the client's request it names
	opAcknowledged // a notification: the client is ready (notifications/initialized)
	opRootsChanged // a notification: the client's roots changed; passed to the servers that ask it for roots
)

// Routing members: the member of a request's params that names what it is
// about, and so the server it goes to.
const (
	routeName = "name" // the name of a tool or prompt in the catalog
	routeURI  = "uri"  // a resource URI, resolved over the catalog and the prefixes
	routeRef  = "ref"  // a completion's reference: a prompt's name or a resource (template) URI
)

// methodInfo is what corral knows of one method.
type methodInfo struct {
	from         sender
	notification bool // no answer is sent, and none is awaited
	op           op   // for a request or a notification from a client: what corral does with it
	kind         kind // for opList, the kind listed; for a routeName forward, the kind named
	member       string
	// mcpName says a modern request repeats its routing member in the
	// Mcp-Name HTTP header.
	mcpName bool
	// cacheable says a modern result carries ttlMs and cacheScope.
	cacheable bool
	eras      era
	// capability is the capability its receiver must have declared, where
	// the route does not already imply it: a tool named in the catalog was
	// listed by a server that offers tools, but a completion's prompt was
	// not listed for completions. For a request from a server, it is the
	// client's capability.
	capability string
}

// methods is every method corral knows, by name. A method not in it is not
// found (see methodInfo's zero value: opNone).
var methods = map[string]methodInfo{
	// Requests from clients.
	"initialize":               {from: fromClient, op: opInitialize, eras: eraLegacy},
	"ping":                     {from: fromClient, op: opPing, eras: eraLegacy},
	"server/discover":          {from: fromClient, op: opDiscover, cacheable: true, eras: eraModern},
	"tools/list":               {from: fromClient, op: opList, kind: kindTool, cacheable: true, eras: eraBoth},
	"prompts/list":             {from: fromClient, op: opList, kind: kindPrompt, cacheable: true, eras: eraBoth},
	"resources/list":           {from: fromClient, op: opList, kind: kindResource, cacheable: true, eras: eraBoth},
	"resources/templates/list": {from: fromClient, op: opList, kind: kindTemplate, cacheable: true, eras: eraBoth},
	"tools/call":               {from: fromClient, op: opForward, kind: kindTool, member: routeName, mcpName: true, eras: eraBoth},
	"prompts/get":              {from: fromClient, op: opForward, kind: kindPrompt, member: routeName, mcpName: true, eras: eraBoth},
	"resources/read":           {from: fromClient, op: opForward, kind: kindResource, member: routeURI, mcpName: true, cacheable: true, eras: eraBoth},
	"completion/complete":      {from: fromClient, op: opForward, member: routeRef, eras: eraBoth, capability: "completions"},
	"resources/subscribe":      {from: fromClient, op: opSubscribe, kind: kindResource, member: routeURI, eras: eraLegacy},
	"resources/unsubscribe":    {from: fromClient, op: opUnsubscribe, kind: kindResource, member: routeURI, eras: eraLegacy},
	"logging/setLevel":         {from: fromClient, op: opSetLevel, eras: eraLegacy, capability: "logging"},
	"subscriptions/listen":     {from: fromClient, op: opListen, eras: eraModern},
	// tasks/get and tasks/cancel are both eras' (2026-07-28's through the
	// tasks extension, which adds tasks/update): "When tasks/get,
	// tasks/update, or tasks/cancel is sent over the Streamable HTTP
	// transport, the client MUST set the Mcp-Name header to the value of
	// params.taskId."
	"tasks/get":    {from: fromClient, op: opTask, member: "taskId", mcpName: true, eras: eraBoth},
	"tasks/result": {from: fromClient, op: opTask, eras: eraLegacy},
	"tasks/cancel": {from: fromClient, op: opTask, member: "taskId", mcpName: true, eras: eraBoth},
	"tasks/update": {from: fromClient, op: opTask, member: "taskId", mcpName: true, eras: eraModern},
	"tasks/list":   {from: fromClient, op: opTaskList, eras: eraLegacy},

	// Notifications from clients.
	"notifications/initialized":        {from: fromClient, notification: true, op: opAcknowledged, eras: eraLegacy},
	"notifications/roots/list_changed": {from: fromClient, notification: true, op: opRootsChanged, eras: eraLegacy},

	// Requests from servers, passed to a client that declared the capability.
	"sampling/createMessage": {from: fromServer, eras: eraBoth, capability: "sampling"},
	"elicitation/create":     {from: fromServer, eras: eraBoth, capability: "elicitation"},
	"roots/list":             {from: fromServer, eras: eraBoth, capability: "roots"},

	// Notifications from servers.
	"notifications/tools/list_changed":         {from: fromServer, notification: true, kind: kindTool, eras: eraBoth},
	"notifications/prompts/list_changed":       {from: fromServer, notification: true, kind: kindPrompt, eras: eraBoth},
	"notifications/resources/list_changed":     {from: fromServer, notification: true, kind: kindResource, eras: eraBoth},
	"notifications/resources/updated":          {from: fromServer, notification: true, kind: kindResource, member: routeURI, eras: eraBoth},
	"notifications/message":                    {from: fromServer, notification: true, eras: eraBoth, capability: "logging"},
	"notifications/subscriptions/acknowledged": {from: fromServer, notification: true, eras: eraModern},
	"notifications/tasks/status":               {from: fromServer, notification: true, eras: eraLegacy},
	"notifications/tasks":                      {from: fromServer, notification: true, eras: eraModern}, // the tasks extension's, on a listen stream

	// Notifications either side sends.
	"notifications/cancelled": {from: fromEither, notification: true, op: opCancel, eras: eraBoth},
	"notifications/progress":  {from: fromEither, notification: true, eras: eraBoth},
}

// served returns what corral does with a request a client sent in era e:
// opNone if the method is not served in that era.
func served(method string, e era) methodInfo {
	info := methods[method]
	if info.from != fromClient || info.notification || info.eras&e == 0 {
		return methodInfo{}
	}
	return info
}

// heard returns what corral does with a notification a client sent: opNone
// if it has nothing to do with it but log it.
func heard(method string) methodInfo {
	info := methods[method]
	if info.from == fromServer || !info.notification {
		return methodInfo{}
	}
	return info
}

// cacheable reports whether the result of method is cacheable in the
// modern era, and so has ttlMs and cacheScope.
func cacheable(method string) bool { return methods[method].cacheable }

// allVersions are the protocol versions corral serves, newest first.
func allVersions() []string { return append([]string{modernVersion}, protocolVersions...) }

// serverInfoMeta is the _meta of a result corral makes itself.
func serverInfoMeta() map[string]any {
	return map[string]any{metaServerInfo: map[string]string{"name": "corral", "version": version}}
}

// kind is a kind of thing servers list: tools, prompts, resources and
// resource templates. The gateway aggregates each kind the same way.
type kind int

const (
	kindTool kind = iota
	kindPrompt
	kindResource
	kindTemplate
	numKinds
)

// kinds describes each kind: the method that lists it, the member of the
// result that holds the list, the member of an item that names it, the
// notification that says the list changed, and the server capability that
// offers it.
var kinds = [numKinds]struct {
	list, field, key, changed, capability string
}{
	kindTool:     {"tools/list", "tools", "name", "notifications/tools/list_changed", "tools"},
	kindPrompt:   {"prompts/list", "prompts", "name", "notifications/prompts/list_changed", "prompts"},
	kindResource: {"resources/list", "resources", "uri", "notifications/resources/list_changed", "resources"},
	kindTemplate: {"resources/templates/list", "resourceTemplates", "uriTemplate", "notifications/resources/list_changed", "resources"},
}

// capabilities are the capabilities a server declared, by name.
type capabilities map[string]json.RawMessage

func (c capabilities) has(k kind) bool { return c[kinds[k].capability] != nil }

// flag reports whether capability name declares the boolean member flag,
// such as resources.subscribe.
func (c capabilities) flag(name, flag string) bool {
	var v map[string]any
	json.Unmarshal(c[name], &v)
	b, _ := v[flag].(bool)
	return b
}

// versionHeader is the name of the MCP-Protocol-Version header in the
// canonical form net/http keys headers by: Header.Get with any other
// spelling makes the canonical one anew on every call.
const versionHeader = "Mcp-Protocol-Version"

// modernVersion is the one modern protocol version corral speaks.
const modernVersion = "2026-07-28"

// protocolVersions are the MCP versions corral speaks, newest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// version is corral's version, reported by -version, in serverInfo and in
// clientInfo, taken from the build (see versionOf). It is set once, before
// main runs, and never changed.
var version = versionOf(debug.ReadBuildInfo())

// versionOf returns the version of a binary built as info says: the main
// module's version, which `go install module@version` sets, and which go
// build (Go 1.24 and later) derives from the repository's tag or commit,
// "+dirty" marking uncommitted changes; else, for a build that set no
// version (go run, go test), the VCS revision's first 12 hex digits, with
// "+dirty" when the tree had changes; else "devel".
func versionOf(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev[:min(12, len(rev))] + dirty
}
