package conformance

import (
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Module is the Go module the suite and fakeserver belong to.
const Module = "github.com/corral-mcp/corral"

// shipped holds the adapters in adapters/, so that the command finds them by
// name (-adapter supergateway) wherever it runs.
//
//go:embed adapters/*.json
var shipped embed.FS

// ShippedAdapters lists the names of the adapters shipped with the suite.
func ShippedAdapters() []string {
	entries, _ := shipped.ReadDir("adapters")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	return names
}

// Config says what to run the suite against.
type Config struct {
	// Adapter is the adapter: a file, or the name of one shipped in
	// adapters/ (corral, supergateway, mcp-proxy, mcp-hub).
	Adapter string
	// Bin, if set, is the gateway's executable, an installed copy: it is
	// {{.Bin}} in the adapter's templates, and the adapter's install steps
	// are not run.
	Bin string
	// Fakeserver, if set, is a fakeserver binary to use instead of
	// building one from this module's source.
	Fakeserver string
}

// sourceDir is the module's source directory (where go.mod is) when the
// suite was built from source, a clone or the module cache; "" otherwise
// (a binary built with -trimpath).
var sourceDir = func() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	dir := filepath.Dir(filepath.Dir(file))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return ""
	}
	return dir
}()

// Setup loads the adapter, builds fakeserver and runs the adapter's setup
// (and its install steps, unless c.Bin names an installed gateway). Teardown
// removes what it made.
func Setup(c Config) error {
	a, err := findAdapter(c.Adapter)
	if err != nil {
		return err
	}
	adapter = a
	if a.dir, err = os.MkdirTemp("", "conformance-"); err != nil {
		return err
	}
	if fakeserverBin, err = buildFakeserver(c.Fakeserver, a.dir); err != nil {
		return err
	}
	data := templateData{Dir: a.dir, Source: sourceDir}
	if c.Bin != "" {
		if a.bin, err = exec.LookPath(c.Bin); err != nil {
			return fmt.Errorf("the gateway's executable %s: %v (the -bin flag or CONFORMANCE_BIN names an installed gateway)", c.Bin, err)
		}
		if a.bin, err = filepath.Abs(a.bin); err != nil {
			return err
		}
	} else {
		a.bin = renderPlain(a.Bin, data)
	}
	data.Bin = a.bin
	steps := a.Setup
	if c.Bin == "" {
		steps = append(append([][]string(nil), a.Setup...), a.Install...)
	} else if a.Bin == "" {
		return fmt.Errorf("adapter %s: it has no bin field, so an installed gateway (%s) cannot replace what it installs; add \"bin\": the executable its install steps make, and use {{.Bin}} in command", a.file, c.Bin)
	}
	for i, step := range steps {
		var argv []string
		for _, w := range step {
			argv = append(argv, renderPlain(w, data))
		}
		field := fmt.Sprintf("setup[%d]", i)
		if i >= len(a.Setup) {
			field = fmt.Sprintf("install[%d]", i-len(a.Setup))
		}
		if len(argv) == 0 {
			return fmt.Errorf("adapter %s: %s is empty: give a command and its arguments", a.file, field)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("adapter %s: %s %q failed: %v\n%s", a.file, field, argv, err, out)
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
	return preflight(a)
}

// Teardown removes what Setup made.
func Teardown() {
	if adapter != nil && adapter.dir != "" {
		os.RemoveAll(adapter.dir)
	}
}

// Gateway returns the adapter's name and the gateway's version, once Setup
// has run.
func Gateway() (name, version, file string) { return adapter.Name, adapter.version, adapter.file }

// findAdapter loads the adapter file at path, or, if there is none and path
// is a plain name, the shipped adapter of that name.
func findAdapter(path string) (*Adapter, error) {
	if _, err := os.Stat(path); err != nil && !strings.ContainsAny(path, `/.`) {
		data, err := shipped.ReadFile("adapters/" + path + ".json")
		if err != nil {
			return nil, fmt.Errorf("-adapter %s: no such file, and no adapter of that name is shipped (those are %s)", path, strings.Join(ShippedAdapters(), ", "))
		}
		return parseAdapter("adapters/"+path+".json (shipped)", data)
	}
	return loadAdapter(path)
}

// buildFakeserver returns the fakeserver binary to use: bin if set, else one
// built into dir from the module's source, else one installed from the
// module proxy at the version the suite was built from.
func buildFakeserver(bin, dir string) (string, error) {
	if bin != "" {
		return filepath.Abs(bin)
	}
	out := filepath.Join(dir, "fakeserver")
	if sourceDir != "" {
		cmd := exec.Command("go", "build", "-o", out, "./fakeserver")
		cmd.Dir = sourceDir
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building fakeserver in %s: %v\n%s", sourceDir, err, msg)
		}
		return out, nil
	}
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Path == Module {
			version = info.Main.Version
		}
		for _, d := range info.Deps {
			if d.Path == Module {
				version = d.Version
			}
		}
	}
	if version == "" || version == "(devel)" {
		return "", fmt.Errorf("cannot find fakeserver's source (the suite was built without it): give a fakeserver binary with -fakeserver (go build %s/fakeserver)", Module)
	}
	cmd := exec.Command("go", "install", Module+"/fakeserver@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s/fakeserver@%s: %v\n%s", Module, version, err, msg)
	}
	return out, nil
}
