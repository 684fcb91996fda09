package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// browserAccept is the Accept header Chromium sends when it opens a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

// getPage sends a GET of url with the given header pairs, and returns the
// response and its body.
func getPage(t *testing.T, method, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// serverRow returns the table row of server name on page, or fails.
func serverRow(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr class="[^"]*" data-server="` + regexp.QuoteMeta(name) + `"[^>]*>.*?</tr>`).FindString(page)
	if m == "" {
		t.Fatalf("no row for server %q on the page:\n%s", name, page)
	}
	return m
}

// serverSection returns the details of server name on page, or fails.
func serverSection(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<section id="server-` + regexp.QuoteMeta(name) + `".*?</section>`).FindString(page)
	if m == "" {
		t.Fatalf("no details for server %q on the page:\n%s", name, page)
	}
	return m
}

func TestStatusPageShowsEveryServerToABrowser(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"restartDelay":"20ms","maxRestarts":2,"failedRetry":"1h","mcpServers":{
		"bad": {"command":"FAKE","args":["-state","STATE","-name","bad","-prefix","bad_","-crash-at-start"]},
		"good": {"command":"FAKE","args":["-state","STATE","-name","good"]}
	}}`)
	bad, good := tg.gw.backends[0], tg.gw.backends[1]
	waitState(t, bad, stateFailed, 30*time.Second)
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("1", "echo", `{"text":"fine"}`)); got != "fine" {
		t.Fatalf("echo answered %q", got)
	}
	if msg := c.callTool("2", "echo", `{"text":5}`); msg.Error == nil {
		t.Fatalf("echo with a number answered %s, want an error", msg.Result)
	}

	base := strings.TrimSuffix(tg.url, mcpPath)
	resp, page := getPage(t, "GET", base+"/", "Accept", browserAccept)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / from a browser = %d %q, want 200 text/html:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}
	for _, want := range []string{`<meta http-equiv="refresh" content="5">`, `<span id="sessions">1</span>`, `1 of 2 servers ready`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
	goodRow := serverRow(t, page, "good")
	h := good.health()
	for _, want := range []string{`data-state="ready"`, "<td>" + strconv.Itoa(h.PID) + "</td>",
		"<td>" + strconv.Itoa(h.Tools) + "</td>", "<td>1</td>", // tools; one prompt
		"<td>2 + 1 templates</td>", // two resources, one template
		"<td>2 / 1</td>",           // within 15 minutes: two calls, one failed
	} {
		if !strings.Contains(goodRow, want) {
			t.Errorf("the ready server's row lacks %s:\n%s", want, goodRow)
		}
	}
	badRow := serverRow(t, page, "bad")
	if pid := bad.health().PID; pid != 0 && strings.Contains(badRow, "<td>"+strconv.Itoa(pid)+"</td>") {
		t.Errorf("the failed server's row shows the PID %d of its last process, which is gone:\n%s", pid, badRow)
	}
	for _, want := range []string{`data-state="failed"`, "<td>2</td>"} { // restarts
		if !strings.Contains(badRow, want) {
			t.Errorf("the failed server's row lacks %s:\n%s", want, badRow)
		}
	}
	details := serverSection(t, page, "bad")
	for _, want := range []string{"exit status 3", "fatal: crash at start", "tried again at"} {
		if !strings.Contains(details, want) {
			t.Errorf("the failed server's details lack %q:\n%s", want, details)
		}
	}
	// failedRetry is 1h, and retryAt is to the second.
	if !regexp.MustCompile(`\(in (59m[0-9]+s|1h0m0s)\)`).MatchString(details) {
		t.Errorf("the failed server's details do not say it is tried again in an hour:\n%s", details)
	}
	if strings.Contains(page, `<section id="server-good"`) {
		t.Errorf("the ready server has details, want none: it has no error, exit or retry:\n%s", page)
	}
	// HEAD answers the same headers, without the page.
	if resp, body := getPage(t, "HEAD", base+"/", "Accept", browserAccept); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD / = %d with %d bytes, want 200 and no body", resp.StatusCode, len(body))
	}
}

func TestStatusPageShowsServerOutputAsText(t *testing.T) {
	t.Parallel()
	// A real process writes markup to stderr and exits.
	tg := startGateway(t, `{"restartDelay":"20ms","maxRestarts":1,"failedRetry":"1h","mcpServers":{
		"xss": {"command":"sh","args":["-c","echo '<script>alert(1)</script><img src=x onerror=alert(2)>' >&2; exit 7"]}
	}}`)
	waitState(t, tg.gw.backends[0], stateFailed, 30*time.Second)
	resp, page := getPage(t, "GET", strings.TrimSuffix(tg.url, mcpPath)+"/", "Accept", browserAccept)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d:\n%s", resp.StatusCode, page)
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;") {
		t.Errorf("the page does not show the server's stderr as escaped text:\n%s", page)
	}
	if lower := strings.ToLower(page); strings.Contains(lower, "<script") || strings.Contains(lower, "<img") {
		t.Errorf("the server's stderr came out as markup:\n%s", page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q, want default-src 'none' (no script, whatever slips through)", csp)
	}
}

// fakeStatus is a statusSource that returns a fixed snapshot.
type fakeStatus gatewayStatus

func (f fakeStatus) status() gatewayStatus { return gatewayStatus(f) }

func TestStatusPageBoundsWhatItShowsOfStderr(t *testing.T) {
	var tail []string
	for i := range 30 {
		tail = append(tail, "line "+strconv.Itoa(i))
	}
	tail[29] = strings.Repeat("x", 1000)
	tail[28] = "bad utf-8: \xff\xfe end"
	now := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	src := fakeStatus{Time: now, Sessions: 3, Servers: []serverStatus{{health: health{
		Name: `a"><b>`, State: stateBackoff, Stderr: tail, Error: "<i>boom</i>"}}}}
	var b bytes.Buffer
	if err := writeStatusPage(&b, src, now, "http://127.0.0.1:8931/mcp"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "line 9\n") || !strings.Contains(page, "line 10\n") {
		t.Errorf("the page shows other than the last %d stderr lines:\n%s", statusLines, page)
	}
	cut := strings.Repeat("x", statusLineRunes-1) + "…\n"
	if !strings.Contains(page, cut) || strings.Contains(page, strings.Repeat("x", statusLineRunes)) {
		t.Errorf("a 1000-byte stderr line is not cut to %d runes:\n%s", statusLineRunes, page)
	}
	if !utf8.ValidString(page) || !strings.Contains(page, "bad utf-8: \uFFFD end") {
		t.Errorf("invalid UTF-8 in stderr is not replaced:\n%s", page)
	}
	if strings.Contains(page, "<b>") || strings.Contains(page, "<i>") || !strings.Contains(page, "&lt;i&gt;boom&lt;/i&gt;") {
		t.Errorf("a name or an error came out as markup:\n%s", page)
	}
}

func TestStatusPageShowsNoSecretOfTheConfig(t *testing.T) {
	t.Parallel()
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("tok-s3cret-0001\n"), 0o600)
	tg := startGateway(t, `{"authTokenFile":"`+token+`","restartDelay":"20ms","maxRestarts":1,"failedRetry":"1h","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-instructions","arg-s3cret-0002"],"env":{"API_KEY":"env-s3cret-0003"}},
		"b": {"command":"FAKE","args":["-state","STATE","-crash-at-start","-instructions","arg-s3cret-0004"],"env":{"API_KEY":"env-s3cret-0005"}},
		"r": {"url":"http://127.0.0.1:1/mcp","headers":{"Authorization":"Bearer hdr-s3cret-0006"}}
	}}`)
	waitState(t, tg.gw.backends[1], stateFailed, 30*time.Second)
	base := strings.TrimSuffix(tg.url, mcpPath)
	resp, page := getPage(t, "GET", base+"/", "Accept", browserAccept, "Authorization", "Bearer tok-s3cret-0001")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / with the token = %d:\n%s", resp.StatusCode, page)
	}
	_, healthz := getPage(t, "GET", base+"/healthz", "Authorization", "Bearer tok-s3cret-0001")
	for _, secret := range []string{"tok-s3cret-0001", "arg-s3cret-0002", "env-s3cret-0003", "arg-s3cret-0004", "env-s3cret-0005", "hdr-s3cret-0006", "API_KEY"} {
		if strings.Contains(page, secret) {
			t.Errorf("the page shows %q, from the config:\n%s", secret, page)
		}
		if strings.Contains(healthz, secret) {
			t.Errorf("/healthz shows %q: the page's test assumes it does not", secret)
		}
	}
	for _, name := range []string{"a", "b", "r"} {
		serverRow(t, page, name)
	}
}

func TestStatusPageFollowsTheAuthAndOriginRules(t *testing.T) {
	t.Parallel()
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("s3cret-token\n"), 0o600)
	tg := startGateway(t, `{"authTokenFile":"`+token+`","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	base := strings.TrimSuffix(tg.url, mcpPath)
	basic := func(user, password string) string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, password)
		return req.Header.Get("Authorization")
	}
	for _, tc := range []struct {
		name, path string
		headers    []string
		want       int
	}{
		{"no token is refused, with a Basic challenge", "/", nil, http.StatusUnauthorized},
		{"the bearer token opens it", "/", []string{"Authorization", "Bearer s3cret-token"}, http.StatusOK},
		{"the token as a Basic password opens it, whatever the user name", "/", []string{"Authorization", basic("anyone", "s3cret-token")}, http.StatusOK},
		{"a wrong Basic password is refused", "/", []string{"Authorization", basic("anyone", "nope")}, http.StatusUnauthorized},
		{"the token as a Basic user name is refused", "/", []string{"Authorization", basic("s3cret-token", "")}, http.StatusUnauthorized},
		{"a wrong bearer token is refused", "/", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"Basic opens nothing but the page: /healthz", "/healthz", []string{"Authorization", basic("anyone", "s3cret-token")}, http.StatusUnauthorized},
		{"Basic opens nothing but the page: / without HTML", "/", []string{"Accept", "*/*", "Authorization", basic("anyone", "s3cret-token")}, http.StatusUnauthorized},
		{"a foreign Host is refused, token or not", "/", []string{"Host", "evil.example", "Authorization", "Bearer s3cret-token"}, http.StatusForbidden},
		{"a foreign Origin is refused, token or not", "/", []string{"Origin", "http://evil.example", "Authorization", "Bearer s3cret-token"}, http.StatusForbidden},
		{"a loopback Origin is let through", "/", []string{"Origin", "http://localhost:8080", "Authorization", "Bearer s3cret-token"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := append([]string{"Accept", browserAccept}, tc.headers...)
			resp, body := getPage(t, "GET", base+tc.path, headers...)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET %s = %d, want %d:\n%s", tc.path, resp.StatusCode, tc.want, body)
			}
			if tc.want == http.StatusUnauthorized && tc.path == "/" && wantsStatusPage(mustRequest(t, headers)) {
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
					t.Errorf("WWW-Authenticate = %q, want a Basic challenge, so that a browser asks for the token", got)
				}
				if strings.Contains(body, "s3cret-token") {
					t.Errorf("the refusal shows the token: %s", body)
				}
			}
		})
	}
}

// mustRequest returns a GET of / with the given header pairs.
func mustRequest(t *testing.T, headers []string) *http.Request {
	req, err := http.NewRequest("GET", "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

func TestRootIsServedAsBeforeToAnythingButABrowser(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	base := strings.TrimSuffix(tg.url, mcpPath)
	for _, tc := range []struct {
		name, method, path, accept string
	}{
		{"curl's Accept", "GET", "/", "*/*"},
		{"no Accept", "GET", "/", ""},
		{"JSON", "GET", "/", "application/json"},
		{"HTML refused with q=0", "GET", "/", "text/html;q=0, application/json"},
		{"a POST", "POST", "/", browserAccept},
		{"another path", "GET", "/index.html", browserAccept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := getPage(t, tc.method, base+tc.path, "Accept", tc.accept)
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s with Accept %q = %d, want 404 as before the page:\n%s", tc.method, tc.path, tc.accept, resp.StatusCode, body)
			}
			if !strings.Contains(body, "corral serves MCP at "+tg.url) {
				t.Errorf("%s %s answered %q, want a line saying the MCP endpoint is %s", tc.method, tc.path, body, tg.url)
			}
		})
	}
	if _, page := getPage(t, "GET", base+"/", "Accept", browserAccept); !strings.Contains(page, "MCP clients connect to <code>"+tg.url+"</code>") {
		t.Errorf("the status page does not show the URL a client should use, %s:\n%s", tg.url, page)
	}
}

func TestMinuteCountsKeepTheLastMinutes(t *testing.T) {
	start := time.Date(2026, 11, 22, 20, 0, 30, 0, time.UTC)
	var c minuteCounts
	c.add(start, false)
	c.add(start, true)
	c.add(start.Add(2*time.Minute), false)
	c.add(start.Add(2*time.Minute+10*time.Second), true)
	type sum struct{ calls, errored int64 }
	for _, tc := range []struct {
		name string
		at   time.Duration // after start
		n    int
		want sum
	}{
		{"the current minute", 2 * time.Minute, 1, sum{2, 1}},
		{"five minutes take in the earlier one", 2 * time.Minute, 5, sum{4, 2}},
		{"a minute with no call counts none", time.Minute, 1, sum{0, 0}},
		{"the first minute leaves the 15-minute window", 15 * time.Minute, recentMinutes, sum{2, 1}},
		{"a full turn of the ring later, old buckets count for nothing", (recentMinutes + 2) * time.Minute, recentMinutes, sum{0, 0}},
		{"nothing is counted before it happened", -time.Minute, recentMinutes, sum{0, 0}},
	} {
		calls, errored := c.sums(start.Add(tc.at), tc.n)
		if got := (sum{calls, errored}); got != tc.want {
			t.Errorf("%s: sums(+%v, %d) = %v, want %v", tc.name, tc.at, tc.n, got, tc.want)
		}
	}
	// A bucket reused a turn later starts again from zero.
	c.add(start.Add(recentMinutes*time.Minute), false)
	if calls, errored := c.sums(start.Add(recentMinutes*time.Minute), 1); calls != 1 || errored != 0 {
		t.Errorf("a reused bucket = %d calls, %d errors, want 1 and 0", calls, errored)
	}
}

func TestWantsStatusPage(t *testing.T) {
	for _, tc := range []struct {
		method, path, accept string
		want                 bool
	}{
		{"GET", "/", browserAccept, true},
		{"HEAD", "/", "text/html", true},
		{"GET", "/", "TEXT/HTML; charset=utf-8", true},
		{"GET", "/", "application/json, text/html;q=0.1", true},
		{"GET", "/", "text/html;q=0", false},
		{"GET", "/", "text/html;q=0.000", false},
		{"GET", "/", "*/*", false},
		{"GET", "/", "text/*", false},
		{"GET", "/", "", false},
		{"POST", "/", "text/html", false},
		{"GET", "/mcp", "text/html", false},
	} {
		req, _ := http.NewRequest(tc.method, "http://127.0.0.1"+tc.path, nil)
		req.Header.Set("Accept", tc.accept)
		if got := wantsStatusPage(req); got != tc.want {
			t.Errorf("wantsStatusPage(%s %s, Accept %q) = %v, want %v", tc.method, tc.path, tc.accept, got, tc.want)
		}
	}
}

// BenchmarkCallMetricsObserve measures what counting a call costs, per-minute
// counts included, with calls ending on every core at once.
func BenchmarkCallMetricsObserve(b *testing.B) {
	var m callMetrics
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.observe(outcomeOK, 3*time.Millisecond)
		}
	})
}
