package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// result is one case's outcome, for the report.
type result struct {
	name    string
	outcome string // "pass", "FAIL", "skip"
	took    time.Duration
	reason  string
}

var (
	resultsMu sync.Mutex
	results   []result
	reasons   = map[*testing.T]string{}
)

// guarantee marks t as a case of the suite: its outcome goes in the report.
func guarantee(t *testing.T) {
	t.Parallel()
	start := time.Now()
	t.Cleanup(func() {
		resultsMu.Lock()
		defer resultsMu.Unlock()
		r := result{name: t.Name(), outcome: "pass", took: time.Since(start), reason: reasons[t]}
		switch {
		case t.Failed():
			r.outcome = "FAIL"
		case t.Skipped():
			r.outcome = "skip"
		default:
			r.reason = ""
		}
		results = append(results, r)
	})
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

// report writes the results as a Markdown table.
func report() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	sort.Slice(results, func(i, j int) bool { return results[i].name < results[j].name })
	var b strings.Builder
	fmt.Fprintf(&b, "Gateway: %s %s (adapter %s), %s, %s\n\n", adapter.Name, adapter.version, adapter.file, time.Now().UTC().Format("2006-01-02"), platform())
	fmt.Fprintf(&b, "| case | result | time | reason |\n|---|---|---|---|\n")
	counts := map[string]int{}
	for _, r := range results {
		counts[r.outcome]++
		reason := strings.ReplaceAll(strings.ReplaceAll(r.reason, "|", `\|`), "\n", " ")
		if len(reason) > 160 {
			reason = reason[:160] + "..."
		}
		fmt.Fprintf(&b, "| %s | %s | %.1fs | %s |\n", strings.TrimPrefix(r.name, "Test"), r.outcome, r.took.Seconds(), reason)
	}
	fmt.Fprintf(&b, "\n%d passed, %d failed, %d skipped\n", counts["pass"], counts["FAIL"], counts["skip"])
	return b.String()
}

func platform() string {
	out, _ := exec.Command("uname", "-sr").Output()
	return strings.TrimSpace(string(out))
}

func TestMain(m *testing.M) {
	if addr := os.Getenv(floorEnv); addr != "" {
		serveFloor(addr) // this process is the benchmarks' HTTP floor
		return
	}
	flagParse()
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(adapter.dir)
	code := m.Run()
	if len(results) > 0 {
		table := report()
		fmt.Print("\n" + table)
		if path := os.Getenv("CONFORMANCE_REPORT"); path != "" {
			os.WriteFile(path, []byte(table), 0o644)
		}
	}
	os.RemoveAll(adapter.dir)
	os.Exit(code)
}

// setup loads the adapter, builds fakeserver and runs the adapter's setup.
func setup() error {
	path := *adapterFlag
	if path == "" {
		path = os.Getenv("CONFORMANCE_ADAPTER")
	}
	if path == "" {
		path = "adapters/corral.json"
	}
	a, err := loadAdapter(path)
	if err != nil {
		return err
	}
	adapter = a
	if a.dir, err = os.MkdirTemp("", "conformance-"); err != nil {
		return err
	}
	fakeserverBin = filepath.Join(a.dir, "fakeserver")
	if out, err := exec.Command("go", "build", "-o", fakeserverBin, "../fakeserver").CombinedOutput(); err != nil {
		return fmt.Errorf("building fakeserver: %v\n%s", err, out)
	}
	data := templateData{Dir: a.dir}
	for _, step := range a.Setup {
		var argv []string
		for _, w := range step {
			argv = append(argv, renderPlain(w, data))
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("adapter setup %q: %v\n%s", argv, err, out)
		}
	}
	if len(a.Version) > 0 {
		var argv []string
		for _, w := range a.Version {
			argv = append(argv, renderPlain(w, data))
		}
		out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		a.version = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	return nil
}
