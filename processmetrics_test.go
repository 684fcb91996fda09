package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// exposition is a page of metrics as parseExposition reads it.
type exposition struct {
	types   map[string]string  // family -> its TYPE
	samples map[string]float64 // series, as name{label="value",...} with labels sorted -> value
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition parses text in the Prometheus text exposition format
// (0.0.4), strictly: only HELP and TYPE comments, each at most once per
// family and before its samples; a known type; a family's samples together;
// valid metric and label names, quoted and escaped label values, float
// values; the suffixes and labels histograms and summaries need; no series
// twice; a final newline. Its error names the first line that breaks a rule.
func parseExposition(text string) (exposition, error) {
	e := exposition{types: map[string]string{}, samples: map[string]float64{}}
	if !strings.HasSuffix(text, "\n") {
		return e, errors.New("the page does not end with a newline")
	}
	helped := map[string]bool{}
	var done []string // families whose samples are over
	current := ""     // the family of the last sample
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kind, rest, _ := strings.Cut(rest, " ")
			name, arg, _ := strings.Cut(rest, " ")
			switch {
			case !metricNameRE.MatchString(name):
				return e, fail("invalid metric name %q", name)
			case kind == "HELP" && helped[name], kind == "TYPE" && e.types[name] != "":
				return e, fail("a second %s for %s", kind, name)
			case slices.Contains(done, name) || name == current:
				return e, fail("%s after the samples of %s", kind, name)
			case kind == "HELP":
				helped[name] = true
			case kind == "TYPE" && slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, arg):
				e.types[name] = arg
			default:
				return e, fail("not a HELP or TYPE line with a known type")
			}
			continue
		}
		series, family, labels, err := parseSample(line, e)
		if err != nil {
			return e, fail("%v", err)
		}
		if family != current {
			if slices.Contains(done, family) {
				return e, fail("a sample of %s apart from the others", family)
			}
			if current != "" {
				done = append(done, current)
			}
			current = family
		}
		name := series[:strings.IndexAny(series+"{", "{")]
		switch typ := e.types[family]; {
		case typ == "":
			return e, fail("a sample of %s before its TYPE", family)
		case typ == "histogram" && strings.HasSuffix(name, "_bucket") && labels["le"] == "":
			return e, fail("a bucket without le")
		case typ == "summary" && name == family && labels["quantile"] == "":
			return e, fail("a summary's sample without quantile")
		}
		if _, dup := e.samples[series]; dup {
			return e, fail("series %s twice", series)
		}
		value := line[strings.LastIndexByte(line, ' ')+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return e, fail("value %q: %v", value, err)
		}
		e.samples[series] = v
	}
	return e, nil
}

// parseSample parses the name and labels of a sample line, and returns the
// series (labels sorted), its family, and its labels.
func parseSample(line string, e exposition) (series, family string, labels map[string]string, err error) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", "", nil, errors.New("no value")
	}
	name, rest, hasLabels := strings.Cut(line[:sp], "{")
	if !metricNameRE.MatchString(name) {
		return "", "", nil, fmt.Errorf("invalid metric name %q", name)
	}
	labels = map[string]string{}
	var pairs []string
	if hasLabels {
		if !strings.HasSuffix(rest, "}") {
			return "", "", nil, errors.New("labels not closed")
		}
		rest = strings.TrimSuffix(rest, "}")
		for rest != "" {
			key, after, ok := strings.Cut(rest, `="`)
			if !ok || !labelNameRE.MatchString(key) {
				return "", "", nil, fmt.Errorf("invalid label in %q", rest)
			}
			var val strings.Builder
			i := 0
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' {
					i++
					if i == len(after) || !strings.ContainsRune(`\"n`, rune(after[i])) {
						return "", "", nil, errors.New("invalid escape in a label value")
					}
				}
				val.WriteByte(after[i])
			}
			if i == len(after) {
				return "", "", nil, errors.New("label value not closed")
			}
			if _, dup := labels[key]; dup {
				return "", "", nil, fmt.Errorf("label %s twice", key)
			}
			labels[key] = val.String()
			pairs = append(pairs, key+`="`+after[:i]+`"`)
			rest = after[i+1:]
			if rest != "" {
				if rest, ok = strings.CutPrefix(rest, ","); !ok || rest == "" {
					return "", "", nil, errors.New("labels not separated by one comma")
				}
			}
		}
	}
	sort.Strings(pairs)
	series = name
	if len(pairs) > 0 {
		series += "{" + strings.Join(pairs, ",") + "}"
	}
	family = name
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (e.types[base] == "histogram" || e.types[base] == "summary" && suffix != "_bucket") {
			family = base
		}
	}
	return series, family, labels, nil
}

func TestParseExpositionIsStrict(t *testing.T) {
	const good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"\"} 3\na_total{x=\"2\"} 4\n" +
		"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.5\nh_count 2\n"
	if e, err := parseExposition(good); err != nil || e.samples[`a_total{x="1",y="q\""}`] != 3 || e.samples["h_count"] != 2 {
		t.Fatalf("parseExposition(a good page) = %v, %v", e.samples, err)
	}
	for name, page := range map[string]string{
		"no final newline":             "# TYPE a gauge\na 1",
		"a sample before its TYPE":     "a 1\n# TYPE a gauge\n",
		"a sample without a TYPE":      "a 1\n",
		"a TYPE twice":                 "# TYPE a gauge\n# TYPE a gauge\na 1\n",
		"a series twice":               "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
		"a family split by another":    "# TYPE a gauge\n# TYPE b gauge\na{x=\"1\"} 1\nb 1\na{x=\"2\"} 1\n",
		"an unknown type":              "# TYPE a meter\na 1\n",
		"another comment":              "# just a comment\n",
		"an invalid metric name":       "# TYPE 1a gauge\n1a 1\n",
		"an invalid escape":            "# TYPE a gauge\na{x=\"\\t\"} 1\n",
		"a value that is no number":    "# TYPE a gauge\na one\n",
		"a bucket without le":          "# TYPE h histogram\nh_bucket 1\n",
		"a summary without a quantile": "# TYPE s summary\ns 1\n",
		"labels without a comma":       "# TYPE a gauge\na{x=\"1\"y=\"2\"} 1\n",
	} {
		if _, err := parseExposition(page); err == nil {
			t.Errorf("parseExposition(%s: %q) = nil error, want one", name, page)
		}
	}
}

// getMetrics returns the page at url, parsed.
func getMetrics(t *testing.T, url string) exposition {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %s, %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	e, err := parseExposition(string(body))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return e
}

func TestMetricsPageIsStrictExpositionWithStandardMetrics(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}, "b.x-1": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"b"}}}`)
	connect(t, tg.url)
	e := getMetrics(t, strings.TrimSuffix(tg.url, mcpPath)+"/metrics")

	want := map[string]string{
		// corral's own, as before.
		"corral_calls_total": "counter", "corral_call_errors_total": "counter", "corral_call_timeouts_total": "counter",
		"corral_call_cancellations_total": "counter", "corral_call_duration_seconds": "histogram",
		"corral_restarts_total": "counter", "corral_server_state": "gauge", "corral_in_flight": "gauge",
		"corral_sessions": "gauge", "corral_event_streams": "gauge", "corral_audit_lines_lost_total": "counter",
		// The Go runtime's, named as the Prometheus Go client names them.
		"go_goroutines": "gauge", "go_threads": "gauge", "go_memstats_alloc_bytes": "gauge",
		"go_memstats_heap_inuse_bytes": "gauge", "go_memstats_sys_bytes": "gauge",
		"go_gc_duration_seconds": "summary", "go_info": "gauge",
	}
	if runtime.GOOS == "linux" {
		for name, typ := range map[string]string{
			"process_cpu_seconds_total": "counter", "process_open_fds": "gauge", "process_max_fds": "gauge",
			"process_virtual_memory_bytes": "gauge", "process_virtual_memory_max_bytes": "gauge",
			"process_resident_memory_bytes": "gauge", "process_start_time_seconds": "gauge",
		} {
			want[name] = typ
		}
	}
	for name, typ := range want {
		if e.types[name] != typ {
			t.Errorf("TYPE of %s = %q, want %q", name, e.types[name], typ)
		}
	}
	positive := []string{"go_goroutines", "go_threads", "go_memstats_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes", `go_info{version="` + runtime.Version() + `"}`, "corral_sessions"}
	if runtime.GOOS == "linux" {
		positive = append(positive, "process_open_fds", "process_max_fds", "process_virtual_memory_bytes", "process_resident_memory_bytes")
		start := e.samples["process_start_time_seconds"]
		if now := float64(time.Now().Unix()); start > now+1 || start < now-24*3600 {
			t.Errorf("process_start_time_seconds = %v, want a time in the last day (now %v)", start, now)
		}
	}
	for _, series := range positive {
		if v := e.samples[series]; !(v > 0) {
			t.Errorf("%s = %v, want > 0", series, v)
		}
	}
	for _, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		if _, ok := e.samples[`go_gc_duration_seconds{quantile="`+q+`"}`]; !ok {
			t.Errorf("go_gc_duration_seconds has no quantile %s", q)
		}
	}
	for _, st := range []string{"starting", "ready", "backoff", "failed", "stopped"} {
		series := `corral_server_state{server="a",state="` + st + `"}`
		if want := map[bool]float64{true: 1}[st == "ready"]; e.samples[series] != want {
			t.Errorf("%s = %v, want %v", series, e.samples[series], want)
		}
	}
	if v, ok := e.samples[`corral_server_state{server="b.x-1",state="ready"}`]; !ok || v != 1 {
		t.Errorf(`the state of server b.x-1 = %v, %v, want 1`, v, ok)
	}
}

// TestProcessAndRuntimeMetricsMove checks that the values follow what the
// process does. It is not parallel: while it runs no parallel test opens
// files or starts goroutines.
func TestProcessAndRuntimeMetricsMove(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process_* metrics are read from /proc, which only Linux has")
	}
	read := func() (processStats, exposition) {
		t.Helper()
		st, err := readProcessStats()
		if err != nil {
			t.Fatalf("readProcessStats: %v", err)
		}
		var b strings.Builder
		writeRuntimeMetrics(&b)
		writeProcessMetrics(&b)
		e, err := parseExposition(b.String())
		if err != nil {
			t.Fatal(err)
		}
		return st, e
	}

	t.Run("open files count in process_open_fds", func(t *testing.T) {
		before, _ := read()
		const n = 64
		var files []*os.File
		for range n {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		opened, page := read()
		for _, f := range files {
			f.Close()
		}
		closed, _ := read()
		if d := opened.openFDs - before.openFDs; d < n-4 || d > n+4 {
			t.Errorf("process_open_fds went from %v to %v opening %d files", before.openFDs, opened.openFDs, n)
		}
		if d := opened.openFDs - closed.openFDs; d < n-4 || d > n+4 {
			t.Errorf("process_open_fds went from %v to %v closing %d files", opened.openFDs, closed.openFDs, n)
		}
		if page.samples["process_open_fds"] < opened.openFDs-4 {
			t.Errorf("the page's process_open_fds = %v, want about %v", page.samples["process_open_fds"], opened.openFDs)
		}
	})

	t.Run("touched memory counts in process_resident_memory_bytes", func(t *testing.T) {
		// Give back what earlier tests left first, so that the runtime
		// does not return it to the system while this measures.
		debug.FreeOSMemory()
		before, _ := read()
		mem := make([]byte, 64<<20)
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		after, page := read()
		runtime.KeepAlive(mem)
		if d := after.residentBytes - before.residentBytes; d < 48<<20 {
			t.Errorf("process_resident_memory_bytes grew by %v touching 64 MiB, want at least 48 MiB", d)
		}
		if page.samples["go_memstats_alloc_bytes"] < 64<<20 {
			t.Errorf("go_memstats_alloc_bytes = %v holding 64 MiB", page.samples["go_memstats_alloc_bytes"])
		}
	})

	t.Run("goroutines count in go_goroutines", func(t *testing.T) {
		_, before := read()
		const n = 100
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { <-stop })
		}
		_, during := read()
		close(stop)
		wg.Wait()
		if d := during.samples["go_goroutines"] - before.samples["go_goroutines"]; d < n-5 {
			t.Errorf("go_goroutines went from %v to %v starting %d goroutines", before.samples["go_goroutines"], during.samples["go_goroutines"], n)
		}
	})

	t.Run("work counts in process_cpu_seconds_total", func(t *testing.T) {
		before, _ := read()
		deadline := time.Now().Add(20 * time.Second)
		x := 1.0
		for {
			for range 1_000_000 {
				x = math.Sqrt(x + 1)
			}
			if now, _ := read(); now.cpuSeconds >= before.cpuSeconds+0.05 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process_cpu_seconds_total stayed at %v after 20s of work", before.cpuSeconds)
			}
		}
		runtime.KeepAlive(x)
	})
}

// BenchmarkStandardMetrics measures what the process_* and go_* metrics add
// to a scrape of /metrics.
func BenchmarkStandardMetrics(b *testing.B) {
	for b.Loop() {
		var sb strings.Builder
		writeProcessMetrics(&sb)
		writeRuntimeMetrics(&sb)
	}
}
