//go:build linux || darwin

// Fakeserver is a scriptable fake MCP server for testing corral and MCP
// gateways in general. It speaks MCP over stdio: newline-delimited JSON-RPC
// 2.0, one message per line, with nothing but MCP messages on standard output
// (unless the garbage tool is called). Standard error is free-form.
//
// Usage:
//
//	fakeserver [flags]
//
// The flags are:
//
//	-name NAME
//		Server name reported in serverInfo and by whoami (default "fake").
//	-prefix STR
//		String prepended to every tool name.
//	-protocol-version V
//		Answer initialize with protocol version V whatever the client asks.
//		Otherwise the client's version is echoed if it is one of 2024-11-05,
//		2025-03-26, 2025-06-18 or 2025-11-25, and 2025-11-25 is used if not.
//	-instructions TEXT
//		Answer initialize with TEXT as the server's instructions.
//	-ignore-method M
//		Record requests of method M and never answer them (a server that
//		ignores requests it does not know, such as server/discover).
//	-era legacy|modern|both
//		Serve the legacy protocol (initialize, then requests; the default),
//		the modern one (2026-07-28: stateless requests, each with its own
//		_meta) or both (see Eras).
//	-extra-tools N
//		Add N tools named PREFIX+"tool_000", PREFIX+"tool_001", ... that
//		answer like whoami.
//	-page-size N
//		Paginate tools/list, resources/list, resources/templates/list and
//		prompts/list, N items a page (default 0: no pagination).
//	-huge-catalog N
//		After its tools, tools/list lists N MiB of padding tools named
//		"pad_000000", "pad_000001", ..., each with a 64 KiB description,
//		made when their page is asked for, so that the server itself never
//		holds more than a page. Implies -page-size 16 (about 1 MiB a page)
//		unless it is set. Padding tools cannot be called.
//	-capabilities LIST
//		Declare only the server capabilities in the comma-separated LIST, a
//		subset of tools, resources, prompts, completions, logging and tasks
//		(default all but tasks). Requests of an undeclared capability get
//		error -32601.
//	-unlisted LIST
//		Answer the list requests (the methods ending in /list) of the
//		capabilities in the comma-separated LIST with error -32601, while
//		still declaring them: a server whose declaration is wrong.
//	-param-headers
//		Add two tools whose inputSchema marks arguments with x-mcp-header
//		(MCP 2026-07-28, SEP-2243): "params" (region: string, header
//		Region; count: integer, header Count; opts.dry: boolean, header Dry;
//		query: string, no header), which answers its arguments as compact
//		JSON text, and "bad_header", whose annotation is on a number (which
//		the specification forbids), so that a client must leave it out.
//	-ttl-ms MS, -cache-scope SCOPE
//		Give modern cacheable results ttlMs MS (default 0) and cacheScope
//		SCOPE (default private).
//	-read-only LIST
//		List the tools in the comma-separated LIST (named without -prefix)
//		with "annotations": {"readOnlyHint": true}; the others have none.
//	-state DIR
//		Record state and events in DIR (see below).
//	-lifetime D
//		Exit with code 0 after D, whatever happens (default 2m; 0 means
//		never). Descendants are given the same -lifetime.
//	-start-delay D
//		Wait D after writing the state file, before reading anything: a
//		server slow to start (default 0).
//	-ignore-sigterm
//		Record SIGTERM but keep running. SIGINT still ends the process.
//	-ignore-stdin-close
//		Keep running after standard input reaches end of file.
//	-crash-at-start
//		Write "fatal: crash at start" to standard error and exit with code 3
//		before reading anything.
//	-crash-in-initialize
//		Exit with code 4, without answering, when initialize arrives.
//	-hang-initialize
//		Never answer initialize. Other requests are still answered.
//	-crash-after N
//		Exit with code 5, without answering, when the Nth tools/call arrives
//		(default 0: never).
//	-roots-at-start
//		When notifications/initialized arrives, ask the client for
//		roots/list with no call in flight, as filesystem servers do, and
//		record {"event":"roots-at-start","reason":WHAT}, WHAT as for
//		roots_later.
//	-stderr-at-start N
//		Write N bytes of log lines to standard error at start.
//	-grandchild MODE
//		At start, spawn a sleeper: a descendant running this executable with
//		-role sleeper. MODE "group" spawns it as an ordinary child, in the
//		server's process group; "setsid" spawns it as a child in a new
//		session; "daemon" spawns an intermediate process (-role daemonizer)
//		that spawns the sleeper in a new session and exits at once, orphaning
//		the sleeper. "clearenv" is "daemon" with the daemonizer in a new
//		session too, and both it and the sleeper with an empty environment:
//		an escape that leaves no trace but the cgroup. The server reads
//		nothing before the sleeper has written its state file, so the
//		sleeper exists once initialize is answered.
//	-grandchild-holds-stdout
//		Let the descendants inherit the server's standard output and standard
//		error. Otherwise their standard input, output and error are /dev/null.
//	-grandchild-ignores-sigterm
//		Pass -ignore-sigterm to the descendants.
//	-grandchild-leaves-cgroup DIRS
//		Have the sleeper move itself into each of the comma-separated cgroup
//		directories DIRS (its PID written to their cgroup.procs) before it
//		writes its state file: out of the server's cgroup, as a server whose
//		user may write those cgroups can.
//	-role server|sleeper|daemonizer
//		The part this process plays (default server). A sleeper does nothing
//		until its lifetime ends or a signal ends it.
//	-ready-fd N
//		Internal: close file descriptor N once the state file is written.
//	-http ADDR
//		Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio
//		(see HTTP, in http.go).
//	-sse ADDR
//		Serve MCP over the HTTP+SSE transport of 2024-11-05 instead of
//		stdio: the event stream at http://ADDR/sse (see HTTP, in http.go).
//	-no-content-type
//		With -http, answer POSTs with a JSON body but no Content-Type.
//	-conformance
//		Serve what the official MCP conformance suite's server scenarios
//		call instead of the tools, resources and prompts below (see
//		Conformance mode, in conformance.go).
//
// SIGTERM (unless -ignore-sigterm) and SIGINT end the process with code 0.
// SIGHUP is recorded and otherwise ignored. Every role handles signals alike.
//
// # Protocol
//
// This section and the next ones describe the legacy protocol; see Eras for
// the modern one. The server answers initialize, ping and the requests of
// the capabilities it declares (see Capabilities). Every other request gets error -32601 "method
// not found: METHOD". Notifications other than notifications/cancelled and
// notifications/roots/list_changed are ignored, and so are responses that do
// not answer a request of the server's (see Requests to the client). A line
// that is not JSON gets error -32700 "parse error" with a null id; valid JSON
// that is not a message gets error -32600 "invalid request". Blank lines are
// ignored. End of file on standard input ends the process with code 0 at
// once: requests still being handled are not answered.
//
// Each request but initialize is handled in its own goroutine, so answers may
// come out of order. A request named by notifications/cancelled while still
// being handled is never answered.
//
// With -page-size, tools/list (and every other list) returns a page of items
// and, while more remain, an opaque "nextCursor". An unknown cursor gets error
// -32602 "invalid cursor".
//
// # Capabilities
//
// Unless -capabilities says otherwise, initialize declares
//
//	{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},
//	 "prompts":{"listChanged":true},"completions":{},"logging":{}}
//
// Below, NAME is the -name flag's value.
//
// tools: tools/list and tools/call (see Tools).
//
// resources: resources/list lists fake://NAME/hello (name "hello", mimeType
// text/plain) and fake://NAME/counter (name "counter");
// resources/templates/list lists fake://NAME/echo/{text} (name "echo").
// resources/read {uri} answers contents [{uri, mimeType: "text/plain", text}]
// where text is "hello from NAME" for hello, the decimal value of a counter
// (starting at 0, incremented by the touch tool) for counter and the
// URL-unescaped X for fake://NAME/echo/X. Other URIs get error -32002
// "resource not found: URI". resources/subscribe and resources/unsubscribe
// {uri} add uri to or remove it from the subscribed set and answer {}.
//
// prompts: prompts/list lists one prompt, {"name":"greet","description":
// "Greets someone.","arguments":[{"name":"who","required":true}]}.
// prompts/get {name: "greet", arguments: {who: W}} answers
// {"description":"greeting","messages":[{"role":"user","content":{"type":
// "text","text":"Hello, W, from NAME"}}]}. An unknown prompt gets error -32602
// `unknown prompt "X"`, a missing who error -32602 `missing argument "who"`.
//
// completions: completion/complete {ref, argument: {name, value}} completes
// argument who of ref {type: "ref/prompt", name: "greet"} from alice, bob and
// carol, and argument text of ref {type: "ref/resource", uri:
// "fake://NAME/echo/{text}"} from one, three and two: it answers
// {"completion":{"values":[...],"total":N,"hasMore":false}} with the choices
// that start with value. Other refs and arguments get error -32602.
//
// tasks (MCP 2025-11-25; only with -capabilities naming it): declared as
// {"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}. A tools/call of
// the task tool with a "task" member in its params creates a task: see
// tasks.go. A task-augmented call of another tool gets error -32601.
//
// logging: logging/setLevel {level} sets the level below which the log tool
// sends nothing, and answers {}. Levels are those of RFC 5424, least severe
// first: debug, info, notice, warning, error, critical, alert, emergency.
// An unknown level gets error -32602 `invalid level "X"`.
//
// # Requests to the client
//
// The tools sample, elicit and roots send a request to the client and wait,
// for at most 30 seconds, for its answer. The server numbers its requests
// with integers from 1. Modern requests never make the server send a
// request (see Eras).
//
// # Tools
//
// Tool names below get the -prefix string prepended. Arguments are fields of
// the "arguments" object. An unknown tool gets error -32602 `unknown tool "X"`
// and ill-typed arguments get error -32602 "invalid arguments: ...".
//
//	echo {text: string, delay_ms?: int}
//		After delay_ms milliseconds, answer text.
//	whoami {}
//		Answer the JSON text {"name":NAME,"pid":PID}, with "env":VALUE too
//		when the environment variable WHOAMI_VALUE is set (to VALUE).
//	sleep {ms: int}
//		After ms milliseconds, answer "slept".
//	hang {}
//		Never answer.
//	wait {file: string}
//		Answer "released" once the file exists (polling every 10ms); until
//		then the call stays in flight, for as long as a test needs.
//	big {bytes: int}
//		Answer a text of the given length whose byte i is 'a'+i%26.
//	stderr {bytes: int}
//		Write the given number of bytes to standard error, as lines of at
//		most 100 bytes each counting the newline, then answer "done".
//	garbage {lines: int}
//		Write the given number of whole non-JSON lines to standard output,
//		then answer "done".
//	crash {code?: int}
//		Write "crashing with code N" to standard error and exit with code N
//		(default 1) without answering.
//	list_changed {}
//		Send notifications/tools/list_changed, then answer "sent".
//	flood {count: int}
//		Send count notifications/message in a single write, then answer
//		"done".
//	touch {}
//		Increment the counter resource's counter; if fake://NAME/counter is
//		subscribed, send notifications/resources/updated for it. Then answer
//		"counter N", N the new value.
//	resources_changed {}
//		Send notifications/resources/list_changed, then answer "sent".
//	prompts_changed {}
//		Send notifications/prompts/list_changed, then answer "sent".
//	progress {steps?: int, delay_ms?: int}
//		If the request has params._meta.progressToken, send
//		notifications/progress {progressToken (as received), progress: i,
//		total: steps, message: "step i of STEPS"} for i from 1 to steps
//		(default 3), waiting delay_ms milliseconds (default 0) between
//		steps; then answer "done STEPS".
//	log {level?: string, data?: string}
//		Unless level (default "info") is less severe than the level set by
//		logging/setLevel, send notifications/message {"level":LEVEL,
//		"logger":"fake","data":DATA}, data defaulting to "hello", and answer
//		"logged"; otherwise answer "filtered".
//	sample {prompt?: string}
//		Send sampling/createMessage {"messages":[{"role":"user","content":
//		{"type":"text","text":PROMPT}}],"maxTokens":100}, prompt defaulting to
//		"hi", and answer "sampled: TEXT", TEXT being result.content.text.
//	elicit {message?: string}
//		Send elicitation/create {"message":MESSAGE,"requestedSchema":
//		{"type":"object","properties":{"name":{"type":"string"}}}}, message
//		defaulting to "name?", and answer "elicited: " followed by the result
//		as compact JSON.
//	roots {}
//		Send roots/list and answer "roots: " followed by result.roots as
//		compact JSON.
//	roots_later {delay_ms?: int}
//		Answer "asking later" at once; delay_ms milliseconds later (default
//		100), with no call in flight, send roots/list and record
//		{"event":"roots-later","reason":WHAT}, WHAT being "roots: " followed
//		by the compact result, or "roots failed: CODE MESSAGE".
//	task {ms?: int, elicit?: bool}
//		After ms milliseconds (default 200), answer "task done MS". Called
//		as a task, create one that ends so, asking the client first with
//		elicit (see tasks.go).
//	links {}
//		Answer {"content":[{"type":"resource_link","uri":"fake://NAME/hello",
//		"name":"hello","mimeType":"text/plain"},{"type":"resource","resource":
//		{"uri":"fake://NAME/counter","mimeType":"text/plain","text":N}},
//		{"type":"resource_link","uri":"fake://NAME/echo/linked","name":
//		"linked"}]}, N the counter.
//	alloc {mib: int}
//		Allocate mib MiB, write to every page of it, and keep it; then
//		answer "allocated MIB MiB". Under a memory limit, the kernel kills
//		the server before it answers.
//	fork {count: int, keep_trying?: bool}
//		Start count processes, one after the other, each running sleep(1)
//		for the server's -lifetime (a day if 0) in the server's process
//		group, with argv[0] "fakeserver -role forked -name NAME -state DIR"
//		(no state file: one process with one thread each, so that a pids
//		limit counts processes), and answer "started K of COUNT", followed
//		by "; first error: ERR" if a start failed. A
//		failed start ends the loop, unless keep_trying: then it tries again
//		at once, as a fork bomb does, and under a pids limit never answers.
//	meta {}
//		Answer the call's params._meta as compacted JSON text, "{}" if it
//		has none: what the server received (a trace context, the keys of
//		its version), in either era.
//	flood_sampling {count: int, answers?: int, bytes?: int, cancel?: bool}
//		Record {"event":"flood-sampling","id":COUNT}, then send count
//		sampling/createMessage requests in one write, each with a prompt of
//		bytes 'x' characters. With cancel, then send notifications/cancelled
//		for each of them and answer "sent COUNT, cancelled COUNT". Otherwise
//		wait until answers (default count) of them are answered, or for 30
//		seconds, and answer "answered A of COUNT: R results, E errors",
//		followed by "; first error: CODE MESSAGE" if E > 0. Legacy only.
//	net_probe {address: string}
//		Dial TCP address, and an address of its own on 127.0.0.1 (for a
//		sandbox: is loopback up?), each bounded by 3 seconds, and answer
//		{"dial":R,"loopback":R}, each R "ok" or the error's text.
//	write_file {path: string, text: string}
//		Write text to the file at path, created or truncated, and answer
//		"written" or the error's text.
//	read_file {path: string}
//		Answer the contents of the file at path, or the error's text.
//
// Answers are results of the form
//
//	{"content":[{"type":"text","text":TEXT}]}
//
// If the client answers the request of sample, elicit or roots with an error,
// the tool answers `{"content":[{"type":"text","text":"WHAT failed: CODE
// MESSAGE"}],"isError":true}`, WHAT being "sampling", "elicitation" or
// "roots"; if the client does not answer in time, the text is "WHAT failed:
// no answer after 30s".
//
// # Eras
//
// With -era legacy, the server behaves as described above whatever the
// requests' _meta holds; server/discover and subscriptions/listen get error
// -32601 as any unknown method does.
//
// A request is modern if params._meta has the member
// "io.modelcontextprotocol/protocolVersion". With -era modern, every request
// must be modern: any other gets error -32602 `missing _meta: ...` with data
// {"supported":["2026-07-28"]}, initialize included. With -era both, each
// request is served by its own _meta: modern if it is modern, legacy
// otherwise, whatever came before (an initialize changes nothing for modern
// requests).
//
// A modern request is checked first: a protocol version that is not a string,
// a missing "io.modelcontextprotocol/clientCapabilities" or one that is not an
// object, or an "io.modelcontextprotocol/logLevel" that is not a level get
// error -32602 `invalid _meta for protocol version 2026-07-28: KEY: PROBLEM`
// with data {"envelope":{"key":KEY,"problem":PROBLEM}}; a version other than
// 2026-07-28 gets error -32022 "unsupported protocol version" with data
// {"supported":VERSIONS,"requested":V}. VERSIONS is ["2026-07-28"] with -era
// modern; with -era both, the legacy versions follow, newest first (or the
// -protocol-version value alone). Then initialize, ping, logging/setLevel,
// resources/subscribe and resources/unsubscribe get error -32601 "method not
// found: METHOD"; other requests are served as legacy ones, but for what
// follows. Client capabilities are taken from each request's _meta, never
// from earlier requests.
//
// Every modern result gets "resultType":"complete" (except input-required
// results, below) and "_meta":{"io.modelcontextprotocol/serverInfo":
// {"name":NAME,"version":"1.0.0"}}. The results of server/discover,
// tools/list, prompts/list, resources/list, resources/templates/list and
// resources/read also get "ttlMs":0 and "cacheScope":"private" (or the
// values of -ttl-ms and -cache-scope). These
// members follow those of the legacy result, in that order. Errors are as in
// the legacy protocol, except that resources/read of an unknown URI gets
// -32602 instead of -32002.
//
// server/discover answers {"supportedVersions":VERSIONS,"capabilities":CAPS}
// plus the members above, CAPS being what initialize would declare.
//
// subscriptions/listen {"notifications":{"toolsListChanged"?: bool,
// "promptsListChanged"?: bool, "resourcesListChanged"?: bool,
// "resourceSubscriptions"?: [URI...]}} opens a listen stream. Without
// notifications, or with ill-typed ones, it gets error -32602. Otherwise it
// is never answered: at once, before reading the next message, the server
// sends notifications/subscriptions/acknowledged {"_meta":
// {"io.modelcontextprotocol/subscriptionId":ID},"notifications":HONOURED},
// ID being the listen request's id as sent and HONOURED the flags asked for
// that are true and whose capability (tools, prompts or resources) is
// declared, and resourceSubscriptions if resources is declared and the list
// is not empty, and taskIds (the tasks extension: -32021 unless the request
// declares it) with those of the listed IDs that name modern tasks it knows,
// whose statuses then come on the stream as notifications/tasks (see
// tasks.go). The stream stays open until a notifications/cancelled names
// ID, after which nothing more is sent on it; several streams may be open.
//
// Change notifications (notifications/tools/list_changed, prompts/list_changed,
// resources/list_changed and resources/updated {uri}) are sent by the tools
// list_changed, prompts_changed, resources_changed and touch. A tool called
// by a modern request sends each only to the open listen streams that asked
// for it (resources/updated to those whose resourceSubscriptions has the
// URI), in the order they were opened, with params._meta
// {"io.modelcontextprotocol/subscriptionId":ID}; called by a legacy request
// (-era both), it also sends it as the legacy protocol does.
//
// Request-scoped notifications go out before the answer, as in the legacy
// protocol. notifications/progress is sent if _meta.progressToken is present.
// notifications/message is sent by log and flood only if the request's
// "io.modelcontextprotocol/logLevel" is present and at most as severe as the
// message's level (flood's are info); otherwise they answer "filtered" and
// send nothing. logging/setLevel does not apply.
//
// The tools sample, elicit and roots need the client capability sampling,
// elicitation or roots in the request's clientCapabilities; without it, they
// get error -32021 "missing required client capability: CAP" with data
// {"requiredCapabilities":{CAP:{}}}. With it, they answer an input-required
// result:
//
//	{"resultType":"input_required","inputRequests":{"in1":{"method":METHOD,
//	 "params":PARAMS}},"requestState":"fake-state-N","_meta":{...}}
//
// METHOD and PARAMS being those of the legacy request to the client (roots
// has no params) and N counting from 1. A tools/call of the same tool whose
// params have requestState equal to a state the server issued for that tool,
// and inputResponses.in1, is answered as the legacy tool answers when the
// client's result is inputResponses.in1 ("sampled: TEXT", ...); any other
// call gets a new input-required result. States can be used any number of
// times.
//
// # State
//
// With -state DIR, every process (whatever its role) writes DIR/PID.json at
// start, atomically (through a temporary file in DIR whose name starts with
// "." and ends with ".tmp", then renamed):
//
//	{"pid":123,"ppid":100,"pgid":100,"sid":90,"role":"server","name":"fake",
//	 "start":"2025-01-02T03:04:05.123456789Z","args":["fakeserver","-state","DIR"]}
//
// role is "server", "sleeper" or "daemonizer"; pgid is the process group; sid
// is the session, omitted if it cannot be known; start is RFC 3339 with
// nanoseconds, in UTC; args is the process's full argument list.
//
// Every process also appends events to DIR/PID.events, one JSON object a
// line, each written with a single write to the file opened with O_APPEND.
// Every event has "time" (RFC 3339 with nanoseconds, in UTC) and "event":
//
//	{"time":T,"event":"signal","signal":"terminated"}
//		A signal was received: "terminated", "interrupt" or "hangup".
//	{"time":T,"event":"request","method":"tools/call","id":7,"tool":"echo"}
//		A request was received, recorded before it is handled. id is the
//		request's id as sent (compacted JSON); tool, the name of the tool as
//		sent, is present only for tools/call. A tools/call whose
//		params._meta.progressToken is present and not null also has
//		"progressToken", the token as compacted JSON. An initialize whose
//		params have "capabilities" also has "capabilities", the client's
//		capabilities as compacted JSON. With -era modern or both, every
//		request event has "era", "modern" if params._meta has the protocol
//		version key (even if the request is then rejected for its _meta),
//		"legacy" otherwise; and "meta", the request's params._meta as
//		compacted JSON, if present and not null.
//	{"time":T,"event":"listen","id":5,"notifications":{...},"uris":["fake://fake/counter"]}
//		A subscriptions/listen with good params was received; recorded
//		before the acknowledgement. notifications is the notifications member
//		of the params as compacted JSON (what was asked, not what was
//		honoured); uris is its resourceSubscriptions, omitted if empty.
//	{"time":T,"event":"listen-cancelled","id":5}
//		The listen stream of request 5 was closed by notifications/cancelled.
//	{"time":T,"event":"input-required","method":"sampling/createMessage","id":7,"tool":"sample","requestState":"fake-state-1"}
//		A modern tools/call (id 7) is about to be answered with an
//		input-required result asking for method.
//	{"time":T,"event":"cancelled","requestId":7,"reason":"timeout"}
//		A notifications/cancelled was received. requestId and reason are
//		omitted if absent; requestId is compacted JSON.
//	{"time":T,"event":"notification","method":"notifications/roots/list_changed"}
//		A notifications/roots/list_changed was received.
//	{"time":T,"event":"subscribe","uri":"fake://fake/counter"}
//	{"time":T,"event":"unsubscribe","uri":"fake://fake/counter"}
//		A resources/subscribe or resources/unsubscribe was handled,
//		recorded before it is answered.
//	{"time":T,"event":"setLevel","level":"warning"}
//		A logging/setLevel was handled, recorded before it is answered.
//	{"time":T,"event":"server-request","method":"roots/list","id":1}
//		The server is about to send a request to the client.
//	{"time":T,"event":"exit","code":0,"reason":"stdin closed"}
//		The process is about to exit deliberately. reason is one of
//		"stdin closed", "lifetime", "signal terminated", "signal interrupt",
//		"crash tool", "crash-at-start", "crash-in-initialize", "crash-after",
//		"daemonized" and "listen failed" (-http or -sse).
//
// Fields of other names may be added; readers should ignore them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Roles a process may play.
const (
	roleServer     = "server"
	roleSleeper    = "sleeper"
	roleDaemonizer = "daemonizer"
)

// capabilityNames are the server capabilities -capabilities may name.
var capabilityNames = []string{"tools", "resources", "prompts", "completions", "logging", "tasks"}

// defaultCapabilities are the capabilities declared without -capabilities:
// all but tasks.
var defaultCapabilities = capabilityNames[:5]

// options holds the command-line flags.
type options struct {
	name                     string
	prefix                   string
	protocolVersion          string
	ignoreMethod             string
	instructions             string
	era                      string
	extraTools               int
	hugeCatalog              int
	ttlMS                    int    // -ttl-ms: the ttlMs of modern cacheable results
	cacheScope               string // -cache-scope: their cacheScope
	paramHeaders             bool
	pageSize                 int
	capabilities             map[string]bool // by name, declared ones only
	unlisted                 map[string]bool // -unlisted, by capability name
	readOnly                 map[string]bool // -read-only, by tool name (without -prefix)
	stateDir                 string
	lifetime                 time.Duration
	startDelay               time.Duration
	ignoreSigterm            bool
	ignoreStdinClose         bool
	crashAtStart             bool
	crashInInitialize        bool
	hangInitialize           bool
	crashAfter               int
	rootsAtStart             bool
	stderrAtStart            int
	grandchild               string
	grandchildHoldsStdout    bool
	grandchildIgnoresSigterm bool
	grandchildLeavesCgroup   string
	clearEnv                 bool
	role                     string
	readyFD                  int
	httpAddr                 string // -http
	sseAddr                  string // -sse
	noContentType            bool
	describe                 string // -describe NAME=TEXT
	ui                       bool   // -ui: an MCP App
	conformance              bool   // -conformance
}

// parseFlags parses the command-line arguments args, not including the
// program name. It reports problems to stderr.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := new(options)
	fs := flag.NewFlagSet("fakeserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.name, "name", "fake", "server `name` reported in serverInfo and by whoami")
	fs.StringVar(&o.prefix, "prefix", "", "`string` prepended to every tool name")
	fs.StringVar(&o.protocolVersion, "protocol-version", "", "answer initialize with this `version` whatever the client asks")
	fs.StringVar(&o.ignoreMethod, "ignore-method", "", "record requests of this `method` and never answer them")
	fs.StringVar(&o.instructions, "instructions", "", "answer initialize with these `instructions` for clients")
	fs.StringVar(&o.era, "era", eraLegacy, "protocol `era` to serve: legacy, modern or both")
	fs.IntVar(&o.extraTools, "extra-tools", 0, "`number` of extra tools that answer like whoami")
	fs.IntVar(&o.pageSize, "page-size", 0, "paginate lists with this many items a page (0: no pagination)")
	fs.IntVar(&o.ttlMS, "ttl-ms", 0, "the ttlMs of modern cacheable results (`ms`)")
	fs.StringVar(&o.cacheScope, "cache-scope", "private", "the cacheScope of modern cacheable results: `scope` public or private")
	fs.BoolVar(&o.paramHeaders, "param-headers", false, "add the tools params and bad_header, whose arguments carry x-mcp-header annotations")
	fs.IntVar(&o.hugeCatalog, "huge-catalog", 0, "list this many `MiB` of padding tools after the others, made a page at a time")
	capabilities := fs.String("capabilities", strings.Join(defaultCapabilities, ","), "comma-separated `list` of the capabilities to declare")
	unlisted := fs.String("unlisted", "", "comma-separated `list` of capabilities whose list requests get -32601")
	readOnly := fs.String("read-only", "", "comma-separated `list` of tools listed with annotations.readOnlyHint true")
	fs.StringVar(&o.stateDir, "state", "", "record state and events in `dir`")
	fs.DurationVar(&o.lifetime, "lifetime", 2*time.Minute, "exit after this `duration` whatever happens (0: never)")
	fs.DurationVar(&o.startDelay, "start-delay", 0, "wait this `duration` before reading stdin (a slow start)")
	fs.BoolVar(&o.ignoreSigterm, "ignore-sigterm", false, "record SIGTERM but keep running")
	fs.BoolVar(&o.ignoreStdinClose, "ignore-stdin-close", false, "keep running after end of file on stdin")
	fs.BoolVar(&o.crashAtStart, "crash-at-start", false, "exit with code 3 before reading anything")
	fs.BoolVar(&o.crashInInitialize, "crash-in-initialize", false, "exit with code 4 when initialize arrives")
	fs.BoolVar(&o.hangInitialize, "hang-initialize", false, "never answer initialize")
	fs.IntVar(&o.crashAfter, "crash-after", 0, "exit with code 5 when the `n`th tools/call arrives (0: never)")
	fs.BoolVar(&o.rootsAtStart, "roots-at-start", false, "ask the client for roots/list when notifications/initialized arrives")
	fs.IntVar(&o.stderrAtStart, "stderr-at-start", 0, "write this many `bytes` of log lines to stderr at start")
	fs.StringVar(&o.grandchild, "grandchild", "", "spawn a sleeper at start: `mode` group, setsid, daemon or clearenv")
	fs.BoolVar(&o.clearEnv, "clear-env", false, "internal: spawn descendants with an empty environment")
	fs.BoolVar(&o.grandchildHoldsStdout, "grandchild-holds-stdout", false, "let descendants inherit stdout and stderr")
	fs.BoolVar(&o.grandchildIgnoresSigterm, "grandchild-ignores-sigterm", false, "pass -ignore-sigterm to descendants")
	fs.StringVar(&o.grandchildLeavesCgroup, "grandchild-leaves-cgroup", "", "the sleeper moves itself into these comma-separated cgroup `dirs` first")
	fs.StringVar(&o.role, "role", roleServer, "`role` of this process: server, sleeper or daemonizer")
	fs.IntVar(&o.readyFD, "ready-fd", 0, "internal: close file descriptor `fd` once the state file is written")
	fs.StringVar(&o.httpAddr, "http", "", "serve Streamable HTTP at `addr` (host:port) instead of stdio")
	fs.StringVar(&o.sseAddr, "sse", "", "serve the HTTP+SSE transport of 2024-11-05 at `addr` (host:port) instead of stdio")
	fs.BoolVar(&o.noContentType, "no-content-type", false, "with -http, answer POSTs without a Content-Type")
	fs.StringVar(&o.describe, "describe", "", "list the tool NAME (without -prefix) with the description TEXT instead of its own: `NAME=TEXT`")
	fs.BoolVar(&o.ui, "ui", false, "be an MCP App: declare the io.modelcontextprotocol/ui extension, list the resource ui://NAME/app.html and a tool \"app\" that names it in _meta.ui.resourceUri")
	fs.BoolVar(&o.conformance, "conformance", false, "serve what the official MCP conformance suite's server scenarios call")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.readOnly = map[string]bool{}
	for _, name := range strings.Split(*readOnly, ",") {
		if name != "" {
			o.readOnly[name] = true
		}
	}
	var err error
	o.capabilities, err = parseCapabilities("-capabilities", *capabilities)
	if err == nil {
		o.unlisted, err = parseCapabilities("-unlisted", *unlisted)
	}
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	case !slices.Contains([]string{"", "group", "setsid", "daemon", "clearenv"}, o.grandchild):
		err = fmt.Errorf("invalid -grandchild %q: want group, setsid, daemon or clearenv", o.grandchild)
	case !slices.Contains([]string{eraLegacy, eraModern, eraBoth}, o.era):
		err = fmt.Errorf("invalid -era %q: want legacy, modern or both", o.era)
	case !slices.Contains([]string{roleServer, roleSleeper, roleDaemonizer}, o.role):
		err = fmt.Errorf("invalid -role %q: want server, sleeper or daemonizer", o.role)
	case o.describe != "" && !strings.Contains(o.describe, "="):
		err = fmt.Errorf("invalid -describe %q: want NAME=TEXT", o.describe)
	case o.httpAddr != "" && o.sseAddr != "":
		err = fmt.Errorf("-http and -sse exclude each other")
	case o.extraTools < 0 || o.pageSize < 0 || o.hugeCatalog < 0 || o.crashAfter < 0 || o.stderrAtStart < 0 || o.readyFD < 0:
		err = fmt.Errorf("numeric flags must not be negative")
	}
	if err != nil {
		fmt.Fprintf(stderr, "fakeserver: %v\n", err)
		fs.Usage()
		return nil, err
	}
	if o.hugeCatalog > 0 && o.pageSize == 0 {
		o.pageSize = padToolsPerMiB // a page of about 1 MiB at a time
	}
	return o, nil
}

// parseCapabilities parses the value of flagName, a list of capabilities
// (-capabilities or -unlisted).
func parseCapabilities(flagName, list string) (map[string]bool, error) {
	caps := make(map[string]bool)
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(capabilityNames, name) {
			return nil, fmt.Errorf("invalid %s: unknown capability %q", flagName, name)
		}
		caps[name] = true
	}
	return caps, nil
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err == flag.ErrHelp {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}
	newServer(opts, os.Stdin, os.Stdout, os.Stderr).run()
}

// A server is one fakeserver process, whatever its role.
type server struct {
	opts   *options
	pid    int
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	output io.Writer // where messages go: stdout, or an HTTP session's streams

	out    chan struct{} // one-slot semaphore held while writing to stdout
	errMu  sync.Mutex    // serializes writes to stderr
	exitMu sync.Mutex    // locked for good by the first deliberate exit

	tools  []*tool          // in tools/list order
	byName map[string]*tool // by full name, prefix included

	mu         sync.Mutex
	inflight   map[*call]struct{}     // requests being handled, not yet answered
	counter    int                    // value of the counter resource
	subscribed map[string]bool        // URIs of the subscribed resources
	logLevel   string                 // set by logging/setLevel; "" if never set
	lastID     int64                  // id of the last request sent to the client
	pending    map[int64]chan message // requests sent to the client, not yet answered, by id
	listeners  []*listener            // subscriptions/listen streams, in the order opened
	lastState  int                    // number of the last requestState issued
	states     map[string]string      // tool names, by requestState issued

	calls int // tools/call requests received so far; used by the reading goroutine only

	tasks       taskStore         // tasks created by task-augmented calls (tasks.go)
	conformance *conformanceState // with -conformance only (conformance.go)
	hog         [][]byte          // what the alloc tool allocated, kept; guarded by mu
}

func newServer(opts *options, stdin, stdout, stderr *os.File) *server {
	s := &server{
		opts:       opts,
		pid:        os.Getpid(),
		stdin:      stdin,
		stdout:     stdout,
		stderr:     stderr,
		output:     stdout,
		out:        make(chan struct{}, 1),
		byName:     make(map[string]*tool),
		inflight:   make(map[*call]struct{}),
		subscribed: make(map[string]bool),
		pending:    make(map[int64]chan message),
		states:     make(map[string]string),
	}
	s.addTools()
	if opts.conformance {
		s.conformance = new(conformanceState)
	}
	return s
}

// run runs the process in its role. It does not return.
func (s *server) run() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go s.handleSignals(sigs)
	if s.opts.lifetime > 0 {
		time.AfterFunc(s.opts.lifetime, func() { s.exit(0, "lifetime") })
	}
	if s.opts.role == roleSleeper && s.opts.grandchildLeavesCgroup != "" {
		for dir := range strings.SplitSeq(s.opts.grandchildLeavesCgroup, ",") {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				s.logf("fakeserver: cannot leave the cgroup: %v", err)
				os.Exit(1)
			}
		}
	}
	if err := s.writeState(); err != nil {
		s.logf("fakeserver: cannot write state: %v", err)
		os.Exit(1)
	}

	switch s.opts.role {
	case roleSleeper:
		s.ready()
		select {} // until a signal or the lifetime ends the process
	case roleDaemonizer:
		ready := s.readyFile()
		cmd, err := s.spawn(roleSleeper, s.opts.ignoreSigterm, true, true, ready)
		if err != nil {
			s.logf("fakeserver: cannot spawn sleeper: %v", err)
		} else {
			cmd.Process.Release()
		}
		s.exit(0, "daemonized")
	}

	if s.opts.crashAtStart {
		s.logf("fatal: crash at start")
		s.exit(3, "crash-at-start")
	}
	time.Sleep(s.opts.startDelay) // a signal or the lifetime may end it
	if n := s.opts.stderrAtStart; n > 0 {
		s.writeStderr(logLines("startup log line", n))
	}
	if s.opts.grandchild != "" {
		if err := s.startGrandchild(); err != nil {
			s.logf("fakeserver: grandchild: %v", err)
		}
	}
	if s.opts.httpAddr != "" || s.opts.sseAddr != "" {
		s.serveHTTP()
	}
	s.serve()
}

// handleSignals records the signals received on c and ends the process for
// those that end it. It returns only with the process.
func (s *server) handleSignals(c <-chan os.Signal) {
	for sig := range c {
		s.record(event{Event: "signal", Signal: sig.String()})
		if sig == syscall.SIGINT || sig == syscall.SIGTERM && !s.opts.ignoreSigterm {
			s.exit(0, "signal "+sig.String())
		}
	}
}

// exit records an exit event and ends the process with the given code.
// The first call wins: later calls block until the process is gone.
// It waits up to a second for a message being written to stdout, so that
// the peer is never left with half a line.
func (s *server) exit(code int, reason string) {
	s.exitMu.Lock() // never unlocked
	s.record(event{Event: "exit", Code: &code, Reason: reason})
	t := time.NewTimer(time.Second)
	select {
	case s.out <- struct{}{}:
	case <-t.C:
	}
	os.Exit(code)
}

// logf writes a line to stderr.
func (s *server) logf(format string, args ...any) {
	s.writeStderr([]byte(fmt.Sprintf(format, args...) + "\n"))
}

// writeStderr writes b to stderr with a single write.
func (s *server) writeStderr(b []byte) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	s.stderr.Write(b)
}

// writeStdout writes b, which must be whole lines, to stdout with a single
// write.
func (s *server) writeStdout(b []byte) {
	s.out <- struct{}{}
	defer func() { <-s.out }()
	if _, err := s.output.Write(b); err != nil {
		s.logf("fakeserver: writing stdout: %v", err)
	}
}

// state is the content of a state file.
type state struct {
	PID   int      `json:"pid"`
	PPID  int      `json:"ppid"`
	PGID  int      `json:"pgid"`
	SID   *int     `json:"sid,omitempty"`
	Role  string   `json:"role"`
	Name  string   `json:"name"`
	Start string   `json:"start"`
	Args  []string `json:"args"`
}

// event is a line of an events file.
type event struct {
	Time          string          `json:"time"`
	Event         string          `json:"event"`
	Signal        string          `json:"signal,omitempty"`
	Method        string          `json:"method,omitempty"`
	ID            json.RawMessage `json:"id,omitempty"`
	Tool          string          `json:"tool,omitempty"`
	ProgressToken json.RawMessage `json:"progressToken,omitempty"`
	Capabilities  json.RawMessage `json:"capabilities,omitempty"`
	RequestID     json.RawMessage `json:"requestId,omitempty"`
	Code          *int            `json:"code,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	URI           string          `json:"uri,omitempty"`
	Level         string          `json:"level,omitempty"`
	Era           string          `json:"era,omitempty"`
	Meta          json.RawMessage `json:"meta,omitempty"`
	Notifications json.RawMessage `json:"notifications,omitempty"`
	URIs          []string        `json:"uris,omitempty"`
	RequestState  string          `json:"requestState,omitempty"`
}

// writeState writes the state file, if there is a state directory.
func (s *server) writeState() error {
	dir := s.opts.stateDir
	if dir == "" {
		return nil
	}
	st := state{
		PID:   s.pid,
		PPID:  os.Getppid(),
		PGID:  syscall.Getpgrp(),
		Role:  s.opts.role,
		Name:  s.opts.name,
		Start: time.Now().UTC().Format(time.RFC3339Nano),
		Args:  os.Args,
	}
	if sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0); errno == 0 {
		n := int(sid)
		st.SID = &n
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+strconv.Itoa(s.pid)+"-*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, strconv.Itoa(s.pid)+".json"))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// record appends e to the events file, if there is a state directory.
func (s *server) record(e event) {
	if s.opts.stateDir == "" {
		return
	}
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(e)
	if err != nil {
		s.logf("fakeserver: cannot encode event: %v", err)
		return
	}
	name := filepath.Join(s.opts.stateDir, strconv.Itoa(s.pid)+".events")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		s.logf("fakeserver: cannot record event: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		s.logf("fakeserver: cannot record event: %v", err)
	}
}

// readyFile returns the file named by -ready-fd, or nil.
func (s *server) readyFile() *os.File {
	if s.opts.readyFD == 0 {
		return nil
	}
	return os.NewFile(uintptr(s.opts.readyFD), "ready")
}

// ready tells the process waiting for this one, if any, that it is ready.
func (s *server) ready() {
	if f := s.readyFile(); f != nil {
		f.Close()
	}
}

// spawn starts this executable in the given role, passing along -name,
// -lifetime and -state. The new process gets -ignore-sigterm if
// ignoreSigterm is set, a new session if setsid is set, and this process's
// stdout and stderr if inherit is set (/dev/null otherwise; its stdin is
// always /dev/null). If ready is not nil, the new process gets it as a
// descriptor to close once its state file is written.
func (s *server) spawn(role string, ignoreSigterm, setsid, inherit bool, ready *os.File) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-role", role, "-name", s.opts.name, "-lifetime", s.opts.lifetime.String()}
	if s.opts.stateDir != "" {
		args = append(args, "-state", s.opts.stateDir)
	}
	if ignoreSigterm {
		args = append(args, "-ignore-sigterm")
	}
	if dirs := s.opts.grandchildLeavesCgroup; dirs != "" {
		args = append(args, "-grandchild-leaves-cgroup", dirs)
	}
	cmd := exec.Command(exe, args...)
	if ready != nil {
		cmd.ExtraFiles = []*os.File{ready}
		cmd.Args = append(cmd.Args, "-ready-fd", "3")
	}
	if inherit {
		cmd.Stdout = s.stdout
		cmd.Stderr = s.stderr
	}
	if setsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if s.opts.grandchild == "clearenv" || s.opts.clearEnv {
		// Nothing of the environment, so no marker a gateway could find.
		cmd.Env = []string{}
		cmd.Args = append(cmd.Args, "-clear-env")
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// startGrandchild spawns the descendant asked for by -grandchild and waits,
// for at most 5 seconds, until the sleeper has written its state file.
// Readiness is signalled by the closing of a pipe whose write end the
// sleeper (and the daemonizer, if any, until it exits) holds.
func (s *server) startGrandchild() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	role := roleSleeper
	if s.opts.grandchild == "daemon" || s.opts.grandchild == "clearenv" {
		role = roleDaemonizer
	}
	setsid := s.opts.grandchild == "setsid" || s.opts.grandchild == "clearenv"
	cmd, err := s.spawn(role, s.opts.grandchildIgnoresSigterm, setsid, s.opts.grandchildHoldsStdout, w)
	w.Close()
	if err != nil {
		return err
	}
	// Reap the child when it exits, so that it does not linger as a zombie.
	go cmd.Wait()
	if err := r.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("waiting for the sleeper to be ready: %v", err)
	}
	return nil
}
