package conformance

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	adapterFlag = flag.String("adapter", "", "the gateway's adapter `file` (default: $CONFORMANCE_ADAPTER, else adapters/corral.json)")
	binFlag     = flag.String("bin", "", "an installed gateway `executable` to run instead of the one the adapter installs (default: $CONFORMANCE_BIN)")
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(floorEnv); addr != "" {
		serveFloor(addr) // this process is the benchmarks' HTTP floor
		return
	}
	flag.Parse()
	c := Config{Adapter: *adapterFlag, Bin: *binFlag}
	if c.Adapter == "" {
		c.Adapter = os.Getenv("CONFORMANCE_ADAPTER")
	}
	if c.Adapter == "" {
		c.Adapter = "adapters/corral.json"
	}
	if c.Bin == "" {
		c.Bin = os.Getenv("CONFORMANCE_BIN")
	}
	if err := Setup(c); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		Teardown()
		os.Exit(2)
	}
	code := m.Run()
	if rs := Results(); len(rs) > 0 {
		table := Markdown(rs)
		fmt.Print("\n" + table)
		if path := os.Getenv("CONFORMANCE_REPORT"); path != "" {
			os.WriteFile(path, []byte(table), 0o644)
		}
	}
	Teardown()
	os.Exit(code)
}

// TestConformance runs every case against the adapter's gateway, each a
// subtest: go test ./conformance -run /CrashLoop runs one.
func TestConformance(t *testing.T) {
	RunCases(t, Cases())
}

// TestRegistryListsEveryCase: every case (a Test function that calls
// guarantee) is in a non-test file and in the registry, once, with a line
// saying what it guarantees; the command runs only what the registry lists.
func TestRegistryListsEveryCase(t *testing.T) {
	listed := map[string]int{}
	for _, c := range Cases() {
		listed[c.Name]++
		if c.Guarantee == "" || strings.Contains(c.Guarantee, "\n") {
			t.Errorf("case %s: its guarantee in registry.go must be one line, not %q", c.Name, c.Guarantee)
		}
	}
	files, _ := filepath.Glob("*.go")
	found := 0
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || !callsGuarantee(fn) {
				continue
			}
			name := strings.TrimPrefix(fn.Name.Name, "Test")
			switch {
			case strings.HasSuffix(file, "_test.go"):
				t.Errorf("case %s is in %s, a test file: the command cannot run it. Move it to a non-test file (git mv %s %s) and list it in registry.go with its one-line guarantee",
					name, file, file, strings.TrimSuffix(file, "_test.go")+".go")
			case listed[name] != 1:
				t.Errorf("case %s (%s) is listed %d times in registry.go, want once, with its one-line guarantee", name, file, listed[name])
				found++
			default:
				found++
			}
		}
	}
	if found != len(listed) {
		t.Errorf("registry.go lists %d cases; the non-test files hold %d functions that call guarantee(t)", len(listed), found)
	}
}

func callsGuarantee(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "guarantee" {
				found = true
			}
		}
		return !found
	})
	return found
}

// TestWrongAdapterIsToldWhichFieldToFix: an adapter whose command exits,
// whose url nobody answers or answers with no MCP, or whose toolName names
// no tool listed, is refused before any case runs, within seconds, by an
// error that names the field to fix.
func TestWrongAdapterIsToldWhichFieldToFix(t *testing.T) {
	saved := adapter
	t.Cleanup(func() { adapter = saved })
	for _, tc := range []struct {
		name  string
		edit  func(a *Adapter)
		want  []string
		bound time.Duration
	}{
		{"a command that exits", func(a *Adapter) { a.Command = []string{"sh", "-c", "echo no such flag: -config >&2; exit 2"} },
			[]string{"fix command", "exit status 2", "no such flag"}, 5 * time.Second},
		{"a url nobody answers", func(a *Adapter) { a.URL = "http://127.0.0.1:1/mcp" },
			[]string{"url http://127.0.0.1:1/mcp: nothing answers", "fix url"}, 5 * time.Second},
		{"a url with the wrong path", func(a *Adapter) { a.URL = strings.Replace(a.URL, "/mcp", "/nope", 1) },
			[]string{"fix url's path", "404"}, 10 * time.Second},
		{"a toolName that names no tool", func(a *Adapter) { a.ToolName = "{{.Server}}.{{.Tool}}" },
			[]string{"toolName", `"pre.pre_whoami"`, `as "pre_whoami"`, "fix toolName"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := *saved
			a.readyFor = 6 * time.Second // a port nobody answers is reported after a sixth: 1 s
			tc.edit(&a)
			adapter = &a
			start := time.Now()
			err := preflight(&a)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("preflight accepted the adapter with %s", tc.name)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("preflight's error lacks %q:\n%v", w, err)
				}
			}
			if took > tc.bound {
				t.Errorf("preflight took %s to refuse %s, want under %s", took, tc.name, tc.bound)
			}
		})
	}
	adapter = saved
	if err := preflight(saved); err != nil {
		t.Errorf("preflight refused the adapter as shipped: %v", err)
	}
}

// TestREADMEResultsTableIsGenerated: README.md's results table is the one
// the command makes from the runs in results/ (corral-conformance -table
// -readme README.md results/*.jsonl), not typed.
func TestREADMEResultsTableIsGenerated(t *testing.T) {
	files, _ := filepath.Glob("results/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no runs in results/")
	}
	var runs [][]Result
	for _, f := range files {
		rs, err := ReadJSONLines(f)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, rs)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, ok := Between(string(readme), "results table")
	if !ok {
		t.Fatal("README.md has no <!-- begin results table --> and <!-- end results table --> lines")
	}
	if want := Table(runs); got != want {
		t.Errorf("README.md's results table is not the one generated from results/*.jsonl: run\n\tgo run ./cmd/corral-conformance -table -readme README.md results/*.jsonl\n(in conformance/)")
	}
}
