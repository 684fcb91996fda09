// Command corral-conformance runs corral's conformance suite for MCP
// gateways against any gateway, given an adapter that says how to run it:
//
//	go run github.com/corral-mcp/corral/conformance/cmd/corral-conformance@latest -adapter adapter.json
//
// It writes JUnit XML (-junit), a Markdown table (-markdown) and JSON lines
// (-json), and exits 1 if a case failed, 2 if the suite could not start.
// -list prints the cases, each with what it guarantees. -table turns the
// JSON lines of several runs into one table (conformance/README.md's).
//
// The cases are Go tests (package conformance); the command runs them with
// the testing package's own runner (testing.Main), so they behave exactly as
// under go test ./conformance. See conformance/README.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-mcp/corral/conformance"
)

func main() {
	testing.Init() // the runner's flags (-test.*), set below from ours
	var (
		adapterPath = flag.String("adapter", "", "the gateway's adapter: a `file`, or the name of a shipped one ("+strings.Join(conformance.ShippedAdapters(), ", ")+")")
		bin         = flag.String("bin", "", "an installed gateway `executable` to run instead of the one the adapter's install steps make")
		run         = flag.String("run", "", "run only the cases whose names match this `regexp`")
		list        = flag.Bool("list", false, "print the cases (those -run selects), each with what it guarantees, and exit")
		junit       = flag.String("junit", "", "write a JUnit XML report to `file`")
		markdown    = flag.String("markdown", "", "write a Markdown table of the results to `file`")
		jsonl       = flag.String("json", "", "write each case's result as a line of JSON to `file`, as it ends")
		fakeserver  = flag.String("fakeserver", "", "a fakeserver `binary` (default: built from the suite's source)")
		timeout     = flag.Duration("timeout", 30*time.Minute, "fail the run if it takes longer than this")
		parallel    = flag.Int("parallel", 0, "how many cases run at once (default: GOMAXPROCS)")
		verbose     = flag.Bool("v", false, "print every case's log, not only failed cases'")
		table       = flag.Bool("table", false, "print one Markdown table of the runs whose JSON lines `files` are the arguments, and exit")
		readme      = flag.String("readme", "", "with -table: replace the table in `file` between its markers instead of printing it")
	)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: corral-conformance -adapter FILE [flags]\n       corral-conformance -list [-run REGEXP]\n       corral-conformance -table [-readme FILE] RUN.jsonl...\n\n")
		flag.VisitAll(func(f *flag.Flag) {
			if !strings.HasPrefix(f.Name, "test.") {
				name, usage := flag.UnquoteUsage(f)
				fmt.Fprintf(os.Stderr, "  -%s %s\n    \t%s\n", f.Name, name, usage)
			}
		})
	}
	flag.Parse()

	if *table {
		os.Exit(tables(flag.Args(), *readme))
	}
	cases := conformance.Cases()
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fatal(2, "-run: %v", err)
		}
		var sel []conformance.Case
		for _, c := range cases {
			if re.MatchString(c.Name) {
				sel = append(sel, c)
			}
		}
		if cases = sel; len(cases) == 0 {
			fatal(2, "-run %q matches no case (-list prints them)", *run)
		}
	}
	if *list {
		for _, c := range cases {
			fmt.Printf("%s: %s\n", c.Name, c.Guarantee)
		}
		return
	}
	if flag.NArg() > 0 {
		fatal(2, "unexpected arguments %q (flags come before them; -table takes files)", flag.Args())
	}
	if *adapterPath == "" {
		fatal(2, "-adapter is required: a file, or one of %s (conformance/README.md, \"Adapters\", says how to write one)", strings.Join(conformance.ShippedAdapters(), ", "))
	}
	if err := conformance.Setup(conformance.Config{Adapter: *adapterPath, Bin: *bin, Fakeserver: *fakeserver}); err != nil {
		conformance.Teardown()
		fatal(2, "%v", err)
	}
	name, version, _ := conformance.Gateway()
	fmt.Printf("corral-conformance: %d case(s) against %s %s\n", len(cases), name, version)

	var jsonFile *os.File
	if *jsonl != "" {
		f, err := os.Create(*jsonl)
		if err != nil {
			conformance.Teardown()
			fatal(2, "-json: %v", err)
		}
		jsonFile = f
	}
	var mu sync.Mutex
	conformance.OnResult = func(r conformance.Result) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%-4s %6.1fs  %s", r.Verdict, r.Seconds, r.Case)
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		fmt.Println(line)
		if jsonFile != nil {
			jsonFile.Write(conformance.JSONLines([]conformance.Result{r}))
		}
	}
	start := time.Now()
	flag.Set("test.timeout", timeout.String())
	flag.Set("test.v", fmt.Sprint(*verbose))
	if *parallel > 0 {
		flag.Set("test.parallel", fmt.Sprint(*parallel))
	}
	suite := func(t *testing.T) {
		t.Cleanup(func() {
			rs := conformance.Results()
			p, f, s := conformance.Counts(rs)
			fmt.Printf("\n%d passed, %d failed, %d skipped in %s\n", p, f, s, time.Since(start).Round(time.Second))
			write := func(flagName, path string, data []byte) {
				if path != "" {
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Errorf("-%s: %v", flagName, err)
					}
				}
			}
			write("junit", *junit, conformance.JUnit(rs, start, time.Since(start)))
			write("markdown", *markdown, []byte(conformance.Markdown(rs)))
			if jsonFile != nil {
				jsonFile.Close()
			}
			conformance.Teardown()
		})
		conformance.RunCases(t, cases)
	}
	testing.Main(func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) },
		[]testing.InternalTest{{Name: "Conformance", F: suite}}, nil, nil)
}

// tables prints (or puts in readme) the table of the runs in files.
func tables(files []string, readme string) int {
	var runs [][]conformance.Result
	for _, f := range files {
		rs, err := conformance.ReadJSONLines(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "corral-conformance:", err)
			return 2
		}
		runs = append(runs, rs)
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "corral-conformance: -table needs the JSON lines files of one or more runs (-json)")
		return 2
	}
	t := conformance.Table(runs)
	if readme == "" {
		fmt.Print(t)
		return 0
	}
	if err := conformance.ReplaceTable(readme, "results table", t); err != nil {
		fmt.Fprintln(os.Stderr, "corral-conformance:", err)
		return 2
	}
	return 0
}

func fatal(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "corral-conformance: "+format+"\n", args...)
	os.Exit(code)
}
