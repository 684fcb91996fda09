package conformance

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Case is one case of the suite: a guarantee a gateway gives, and the test
// that checks it.
type Case struct {
	Name      string           // the guarantee, as a name: the function's name without "Test"
	Guarantee string           // what the case guarantees, in one line (-list)
	Run       func(*testing.T) // the case; it calls guarantee(t) first
}

// Cases lists the suite's cases in the order of registry.
func Cases() []Case {
	var cs []Case
	for _, r := range registry {
		name := runtime.FuncForPC(reflect.ValueOf(r.run).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		cs = append(cs, Case{Name: strings.TrimPrefix(name, "Test"), Guarantee: r.guarantee, Run: r.run})
	}
	return cs
}

// RunCases runs cases as subtests of t, in parallel (each case calls
// guarantee, which calls t.Parallel). They have all ended when t has: its
// Cleanup functions see every result.
func RunCases(t *testing.T, cases []Case) {
	for _, c := range cases {
		t.Run(c.Name, c.Run)
	}
}

// Result is one case's outcome, as the reports give it.
type Result struct {
	Case    string  `json:"case"`
	Verdict string  `json:"verdict"` // "pass", "fail" or "skip"
	Seconds float64 `json:"seconds"`
	Reason  string  `json:"reason,omitempty"` // why it failed or was skipped
	Gateway string  `json:"gateway"`          // the adapter's name
	Version string  `json:"version,omitempty"`
	Date    string  `json:"date"` // UTC, 2006-01-02
}

var (
	resultsMu sync.Mutex
	results   []Result
	reasons   = map[*testing.T]string{}

	// OnResult, if set, is called with each case's result as the case
	// ends, one call at a time (the command prints and writes it).
	OnResult func(Result)
)

// guarantee marks t as a case of the suite: its outcome goes in the
// reports. A case calls it first.
func guarantee(t *testing.T) {
	t.Parallel()
	start := time.Now()
	t.Cleanup(func() {
		resultsMu.Lock()
		defer resultsMu.Unlock()
		name := t.Name()
		name = strings.TrimPrefix(name[strings.LastIndex(name, "/")+1:], "Test")
		r := Result{Case: name, Verdict: "pass", Seconds: time.Since(start).Seconds(), Reason: reasons[t],
			Gateway: adapter.Name, Version: adapter.version, Date: time.Now().UTC().Format("2006-01-02")}
		switch {
		case t.Failed():
			r.Verdict = "fail"
			if r.Reason == "" {
				r.Reason = "(the case gave no reason: see its log)"
			}
		case t.Skipped():
			r.Verdict = "skip"
		default:
			r.Reason = ""
		}
		results = append(results, r)
		if OnResult != nil {
			OnResult(r)
		}
	})
}

// Results returns the results so far, sorted by case.
func Results() []Result {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	rs := append([]Result(nil), results...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Case < rs[j].Case })
	return rs
}

func note(t *testing.T, msg string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if reasons[t] == "" {
		reasons[t] = msg
	}
}

// fail records why the case failed and marks it failed.
func fail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	note(t, msg)
	t.Error(msg)
}

// fatal is fail, then the end of the case.
func fatal(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	note(t, msg)
	t.Fatal(msg)
}

// skip records why the gateway cannot express the case and skips it.
func skip(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	note(t, msg)
	t.Skip(msg)
}

// Counts returns how many results passed, failed and were skipped.
func Counts(rs []Result) (passed, failed, skipped int) {
	for _, r := range rs {
		switch r.Verdict {
		case "pass":
			passed++
		case "fail":
			failed++
		case "skip":
			skipped++
		}
	}
	return
}

// Markdown writes one gateway's results as a Markdown table, with a line
// naming the gateway, the date and the platform.
func Markdown(rs []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Gateway: %s (adapter %s), %s, %s\n\n", gatewayTitle(adapter.Name, adapter.version), adapter.file, time.Now().UTC().Format("2006-01-02"), Platform())
	fmt.Fprintf(&b, "| case | result | time | reason |\n|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %.1fs | %s |\n", r.Case, verdictCell(r.Verdict), r.Seconds, cell(r.Reason, 160))
	}
	p, f, s := Counts(rs)
	fmt.Fprintf(&b, "\n%d passed, %d failed, %d skipped\n", p, f, s)
	return b.String()
}

func verdictCell(v string) string {
	if v == "fail" {
		return "**FAIL**"
	}
	return v
}

// cell makes s fit a Markdown table's cell of at most n bytes (0: any).
func cell(s string, n int) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
	if n > 0 && len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// JSONLines writes each result as a line of JSON.
func JSONLines(rs []Result) []byte {
	var b []byte
	for _, r := range rs {
		line, _ := json.Marshal(r)
		b = append(append(b, line...), '\n')
	}
	return b
}

// Platform names the kernel, for the reports.
func Platform() string {
	out, _ := exec.Command("uname", "-sr").Output()
	return strings.TrimSpace(string(out))
}

// gatewayTitle is the gateway's name and version, the name once.
func gatewayTitle(name, version string) string {
	switch {
	case version == "":
		return name
	case strings.HasPrefix(version, name+" "):
		return version
	}
	return name + " " + version
}
