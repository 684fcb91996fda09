package main

// This file holds the status page: an HTML view, for a person in a browser,
// of what /healthz and /metrics report. It is a front end: it reads the
// gateway's status through statusSource and nothing else, so it shows
// nothing that /healthz does not (no arguments, environment, headers or
// token). It needs no JavaScript and refreshes itself.

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// statusSource is what the status page reads of the gateway below it: a
// snapshot of every server's health and recent calls. *Gateway implements it.
type statusSource interface {
	status() gatewayStatus
}

const (
	// statusRefresh is how often the page reloads itself.
	statusRefresh = 5 * time.Second
	// statusLineRunes is how much of each stderr line the page shows; a
	// longer line is cut and ends in "…".
	statusLineRunes = 240
	// statusLines is how many of a server's last stderr lines the page
	// shows, at most.
	statusLines = stderrTailLines
)

// wantsStatusPage reports whether r asks for the status page: a GET or HEAD
// of / whose Accept header names text/html (as every browser's does). Any
// other request of / is served as it was before the page existed.
func wantsStatusPage(r *http.Request) bool {
	if r.URL.Path != "/" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != "text/html" {
			continue
		}
		q, ok := params["q"]
		f, err := strconv.ParseFloat(q, 64)
		if !ok || (err == nil && f > 0) {
			return true
		}
	}
	return false
}

// serveStatusPage serves the status page. When a bearer token is
// configured, the request must carry it, as every other request must, or
// carry it as the password of HTTP Basic authentication (any user name):
// a browser asks for that itself, keeps it for the browser's session, and sends it
// with each refresh, so that the token never goes in a URL. Basic is
// accepted here only, on this read-only page, so that credentials a browser
// sends by itself can never make a call.
//
// endpoint says where an MCP client reaches corral: shown on the page.
func (h *httpFrontEnd) serveStatusPage(w http.ResponseWriter, r *http.Request, endpoint string) {
	if !h.seesAll(r) && !h.basicAuthorized(r) { // a client whose profile hides servers does not see them here
		w.Header().Set("WWW-Authenticate", `Basic realm="corral status page", charset="UTF-8"`)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, "The status page needs corral's bearer token: send Authorization: Bearer TOKEN, or give the token as the password (any user name) when the browser asks.")
		return
	}
	var b bytes.Buffer
	if err := writeStatusPage(&b, h.gw.status, time.Now(), endpoint); err != nil {
		h.log.Error("writing the status page", "err", err)
		http.Error(w, "writing the status page failed; see corral's log", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Vary", "Accept, Authorization")
	// No script, frame or remote resource, whatever a server's stderr holds.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	w.Write(b.Bytes())
}

// basicAuthorized reports whether a bearer token is configured and the
// request carries it as its HTTP Basic password, compared in constant time.
func (h *httpFrontEnd) basicAuthorized(r *http.Request) bool {
	token := h.gw.config().token
	_, password, ok := r.BasicAuth()
	return token != "" && ok && subtle.ConstantTimeCompare([]byte(password), []byte(token)) == 1
}

// writeStatusPage writes the status page of src, as it is at now, to b,
// saying that clients reach corral at endpoint.
func writeStatusPage(b *bytes.Buffer, src statusSource, now time.Time, endpoint string) error {
	v := newStatusView(src.status(), now)
	v.Endpoint, v.EndpointIsURL = endpoint, strings.HasPrefix(endpoint, "http")
	return statusTemplate.Execute(b, v)
}

// endpointURL returns the URL of /mcp as the client of r reached corral:
// the one to give an MCP client.
func endpointURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + mcpPath
}

// serveNotFound answers a request of a path corral does not serve with 404
// and a line saying where what it serves is: endpoint is the MCP endpoint
// as r reached it, or a sentence when there is none (-stdio).
func serveNotFound(w http.ResponseWriter, r *http.Request, endpoint string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	if strings.HasPrefix(endpoint, "http") {
		fmt.Fprintf(w, "404 page not found: %s is not served here. corral serves MCP at %s (Streamable HTTP; legacy HTTP+SSE clients: %s), the status page at / (open it in a browser), /healthz and /metrics.\n",
			r.URL.Path, endpoint, strings.TrimSuffix(endpoint, mcpPath)+sseFrontPath)
		return
	}
	fmt.Fprintf(w, "404 page not found: %s is not served here. This port serves corral's status page at / and /healthz only; %s.\n", r.URL.Path, endpoint)
}

// stdioEndpoint is what the status page says of the MCP endpoint of a
// corral run with -stdio.
const stdioEndpoint = "corral serves MCP on its stdin and stdout (-stdio), to the one client that started it"

// statusOnly serves the status page (GET or HEAD of /, whatever the Accept
// header) and /healthz, with the token, Host and Origin rules of the HTTP
// front end, and nothing else: what -status-listen serves beside a -stdio
// session. It is safe for concurrent use.
type statusOnly struct{ h *httpFrontEnd }

func (s statusOnly) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := s.h.checkOrigin(r); msg != "" {
		writeHTTPError(w, http.StatusForbidden, codeInvalidRequest, msg)
		return
	}
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.h.serveStatusPage(w, r, stdioEndpoint)
	case r.URL.Path == "/healthz" && !s.h.authorized(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
		writeHTTPError(w, http.StatusUnauthorized, codeInvalidRequest, "missing or wrong bearer token; send Authorization: Bearer TOKEN")
	case r.URL.Path == "/healthz":
		s.h.serveHealth(w, r)
	default:
		serveNotFound(w, r, stdioEndpoint)
	}
}

// newStatusOnly returns what -status-listen serves of gw: see statusOnly.
// The listener is on a loopback address, so Host headers are checked.
func newStatusOnly(gw *Gateway, log *slog.Logger) http.Handler {
	return statusOnly{h: newHTTPFrontEnd(gw, true, log)}
}

// statusView is what the page's template reads: the snapshot, put in words.
type statusView struct {
	Endpoint      string // where an MCP client reaches corral: a URL, or a sentence
	EndpointIsURL bool
	Refresh       int // seconds
	Time          string
	Ready         int
	Idle          int // not running until a request needs them
	Sessions      int
	Servers       []serverView
	Windows       []int // minutes
	Clients       []clientView
	// Costs are the servers' tool definitions, largest first: what
	// listing every tool costs a client's context.
	Costs      []costView
	PinChanges []pinView
}

// costView is one server's row of the tool definitions' costs.
type costView struct {
	Server       string
	Tools, Bytes int
	Tokens       int // estimated as bytes/4
}

// pinView is one changed tool definition (pins.go).
type pinView struct {
	Server, Tool, Mode, Since string
	Diff                      []string
}

// clientView is one client's row: its sessions, calls and recent refusals.
type clientView struct {
	Name               string
	Sessions, InFlight int
	Calls, Refused     int64
	Recent             []string // newest first, each "15:04:05 reason what"
}

// serverView is one server's row, and its details.
type serverView struct {
	Name, State                                   string
	PID                                           int
	Uptime                                        string
	Restarts, Tools, Prompts, Resources, InFlight int
	Templates                                     int
	Recent                                        []recentCalls
	LastExit, Error, Retry                        string
	Stderr                                        []string
}

// newStatusView puts st, taken at now, in words.
func newStatusView(st gatewayStatus, now time.Time) statusView {
	v := statusView{Refresh: int(statusRefresh / time.Second), Time: st.Time.UTC().Format("2006-01-02 15:04:05 UTC"), Sessions: st.Sessions}
	for _, n := range recentWindows {
		v.Windows = append(v.Windows, n)
	}
	for _, c := range st.Clients {
		cv := clientView{Name: c.Name, Sessions: c.Sessions, InFlight: c.InFlight, Calls: c.Calls, Refused: c.Refused}
		for _, r := range c.Recent {
			cv.Recent = append(cv.Recent, r.Time.UTC().Format("15:04:05")+" "+r.Reason+" "+r.What)
		}
		v.Clients = append(v.Clients, cv)
	}
	var costs []toolCost
	for _, s := range st.Servers {
		if s.ToolCost.Tools > 0 {
			costs = append(costs, s.ToolCost)
		}
	}
	largestFirst(costs)
	for _, c := range costs {
		v.Costs = append(v.Costs, costView{Server: c.Server, Tools: c.Tools, Bytes: c.Bytes, Tokens: c.Bytes / 4})
	}
	for _, c := range st.PinChanges {
		v.PinChanges = append(v.PinChanges, pinView{Server: c.Server, Tool: c.Tool, Mode: c.Mode, Since: c.Since.UTC().Format("2006-01-02 15:04:05 UTC"), Diff: c.Diff})
	}
	for _, s := range st.Servers {
		switch s.State {
		case stateReady:
			v.Ready++
		case stateIdle:
			v.Idle++
		}
		sv := serverView{Name: s.Name, State: string(s.State), Uptime: s.Uptime, Restarts: s.Restarts,
			Tools: s.Tools, Prompts: s.Prompts, Resources: s.Resources, Templates: s.Templates, InFlight: s.InFlight,
			Recent: s.Recent[:], LastExit: s.LastExit, Error: s.Error, Retry: retryText(s.RetryAt, now)}
		if s.State == stateStarting || s.State == stateReady {
			sv.PID = s.PID // else it is the PID of a process gone, perhaps reused
		}
		tail := s.Stderr
		if len(tail) > statusLines {
			tail = tail[len(tail)-statusLines:]
		}
		for _, line := range tail {
			sv.Stderr = append(sv.Stderr, shortLine(line, statusLineRunes))
		}
		v.Servers = append(v.Servers, sv)
	}
	return v
}

// retryText says when a failed server is tried again, given the RFC 3339
// time of its health report; "" if there is none.
func retryText(retryAt string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, retryAt)
	if err != nil {
		return ""
	}
	at := t.UTC().Format("15:04:05 UTC")
	if d := t.Sub(now).Round(time.Second); d > 0 {
		return fmt.Sprintf("%s (in %s)", at, d)
	}
	return at + " (now)"
}

// statusTemplate is the page. html/template escapes every value by its
// context, so that a server's stderr is shown as text, never read as markup.
var statusTemplate = template.Must(template.New("status").Parse(statusHTML))

const statusHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>corral: {{.Ready}} of {{len .Servers}} servers ready</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
.meta { color: #666; margin-bottom: 1em; }
table { border-collapse: collapse; }
th, td { padding: .3em .7em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, td.state { text-align: left; }
td.state { font-weight: 600; }
tr.ready td.state { color: #176f2c; }
tr.starting td.state, tr.backoff td.state { color: #8a5a00; }
tr.failed td.state { color: #b00020; }
tr.stopped td.state, tr.idle td.state { color: #666; }
section { margin-top: 1.5em; }
h2 { font-size: 1.1em; margin: 0 0 .3em; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; margin: 0 0 .5em; }
dt { color: #666; }
dd { margin: 0; }
pre { background: #f4f4f4; padding: .6em; overflow-x: auto; margin: 0; white-space: pre-wrap; word-break: break-all; }
</style>
</head>
<body>
<h1>corral</h1>
{{with .Endpoint}}<p class="endpoint">{{if $.EndpointIsURL}}MCP clients connect to <code>{{.}}</code> (Streamable HTTP){{else}}{{.}}{{end}}</p>{{end}}
<p class="meta">{{.Ready}} of {{len .Servers}} servers ready{{if .Idle}}, {{.Idle}} idle{{end}} · <span id="sessions">{{.Sessions}}</span> sessions open · {{.Time}} · refreshes every {{.Refresh}} s</p>
<table>
<thead>
<tr><th>server</th><th>state</th><th>PID</th><th>uptime</th><th>restarts</th><th>tools</th><th>prompts</th><th>resources</th><th>in flight</th>{{range .Windows}}<th>calls / errors, {{.}} min</th>{{end}}</tr>
</thead>
<tbody>
{{range .Servers}}<tr class="{{.State}}" data-server="{{.Name}}" data-state="{{.State}}">
<td><a href="#server-{{.Name}}">{{.Name}}</a></td>
<td class="state">{{.State}}</td>
<td>{{if .PID}}{{.PID}}{{else}}–{{end}}</td>
<td>{{or .Uptime "–"}}</td>
<td>{{.Restarts}}</td>
<td>{{.Tools}}</td>
<td>{{.Prompts}}</td>
<td>{{.Resources}}{{if .Templates}} + {{.Templates}} templates{{end}}</td>
<td>{{.InFlight}}</td>
{{range .Recent}}<td>{{.Calls}} / {{.Errored}}</td>{{end}}
</tr>
{{end}}</tbody>
</table>
{{with .Costs}}<section id="tool-definitions">
<h2>tool definitions, largest first</h2>
<p class="meta">what listing every tool costs a client's context: bytes of JSON, tokens estimated as bytes/4</p>
<table>
<thead>
<tr><th>server</th><th>tools</th><th>bytes</th><th>tokens</th></tr>
</thead>
<tbody>
{{range .}}<tr data-tool-cost="{{.Server}}">
<td>{{.Server}}</td>
<td class="tools">{{.Tools}}</td>
<td class="bytes">{{.Bytes}}</td>
<td>{{.Tokens}}</td>
</tr>
{{end}}</tbody>
</table>
</section>
{{end}}{{with .PinChanges}}<section id="pins">
<h2>changed tool definitions</h2>
{{range .}}<div class="pin-change" data-server="{{.Server}}" data-tool="{{.Tool}}">
<h3>{{.Server}} / {{.Tool}}: {{if eq .Mode "block"}}withheld until accepted{{else}}served (pin "warn"){{end}}, since {{.Since}}</h3>
<pre class="diff">{{range .Diff}}{{.}}
{{end}}</pre>
<p>Accept it: start corral with <code>-accept-pins {{.Server}}/{{.Tool}}</code>; or, where the config has a bearer token, POST <code>{"tools": ["{{.Server}}/{{.Tool}}"]}</code> to <code>/admin/pins/accept</code> with it; or delete the pin file and reload.</p>
</div>
{{end}}</section>
{{end}}{{with .Clients}}<section id="clients">
<h2>clients</h2>
<table>
<thead>
<tr><th>client</th><th>sessions</th><th>in flight</th><th>calls</th><th>refused</th><th>recent refusals</th></tr>
</thead>
<tbody>
{{range .}}<tr data-client="{{.Name}}">
<td>{{.Name}}</td>
<td class="sessions">{{.Sessions}}</td>
<td>{{.InFlight}}</td>
<td class="calls">{{.Calls}}</td>
<td class="refused">{{.Refused}}</td>
<td class="recent">{{range $i, $r := .Recent}}{{if $i}}; {{end}}{{$r}}{{end}}</td>
</tr>
{{end}}</tbody>
</table>
</section>
{{end}}{{range .Servers}}{{if or .Error .LastExit .Retry .Stderr}}
<section id="server-{{.Name}}" data-server="{{.Name}}">
<h2>{{.Name}}: {{.State}}</h2>
<dl>
{{if .Error}}<dt>error</dt><dd class="error">{{.Error}}</dd>{{end}}
{{if .LastExit}}<dt>last exit</dt><dd class="last-exit">{{.LastExit}}</dd>{{end}}
{{if .Retry}}<dt>tried again at</dt><dd class="retry">{{.Retry}}</dd>{{end}}
</dl>
{{if .Stderr}}<pre class="stderr">{{range .Stderr}}{{.}}
{{end}}</pre>{{end}}
</section>
{{end}}{{end}}
</body>
</html>
`
