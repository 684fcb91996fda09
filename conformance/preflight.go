package conformance

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// preflight starts the gateway once with one server before any case, and
// turns the usual mistakes of a new adapter into an error that names the
// field to fix, within seconds: a command that exits, a url nobody answers
// or that answers no MCP, a toolName that names none of the tools listed.
// Without it every case would fail on its own after readyTimeout.
func preflight(a *Adapter) error {
	stateDir, err := os.MkdirTemp("", "conformance-preflight-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	defer killMarked(stateDir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	caseDir := filepath.Join(stateDir, "case")
	os.Mkdir(caseDir, 0o700)
	args := []string{"-state", stateDir, "-name", "pre", "-prefix", "pre_", "-lifetime", "2m"}
	data := templateData{Dir: a.dir, Source: sourceDir, Bin: a.bin, CaseDir: caseDir, ConfigPath: filepath.Join(caseDir, "config.json"),
		StateDir: stateDir, Port: port, Servers: []templateServer{{Name: "pre", Command: fakeserverBin, Args: args,
			CommandLine: shellQuote(append([]string{fakeserverBin}, args...))}}}
	field := func(name, text string) (string, error) {
		s, err := renderErr(name, text, data)
		if err != nil {
			return "", fmt.Errorf("%v: fix the template", err)
		}
		return s, nil
	}
	if a.ConfigTemplate != "" {
		config, err := field("configTemplate", a.ConfigTemplate)
		if err != nil {
			return err
		}
		os.WriteFile(data.ConfigPath, []byte(config), 0o600)
	}
	var argv []string
	for i, w := range a.Command {
		s, err := field(fmt.Sprintf("command[%d]", i), w)
		if err != nil {
			return err
		}
		if s != "" {
			argv = append(argv, s)
		}
	}
	if len(argv) == 0 {
		return fmt.Errorf("adapter %s: command renders to nothing: give the gateway's command line", a.file)
	}
	g := &gateway{servers: []serverSpec{{Name: "pre"}}, exited: make(chan struct{}), tokens: map[string]string{}}
	if g.url, err = field("url", a.URL); err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), a.Env...)
	cmd.WaitDelay = 2 * time.Second
	var out strings.Builder
	var outMu sync.Mutex
	w := &lockedWriter{mu: &outMu, w: &out}
	cmd.Stdout, cmd.Stderr = w, w
	if a.Transport == "stdio" {
		cmd.Stdin = nil // a stdio gateway that reads nothing still must not exit at once
		cmd.Stdout = nil
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("adapter %s: command: %v: fix command[0] (%s)", a.file, err, argv[0])
	}
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(g.exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-g.exited
		}
	}()
	output := func() string {
		outMu.Lock()
		defer outMu.Unlock()
		s := strings.TrimSpace(out.String())
		if len(s) > 2000 {
			s = "..." + s[len(s)-2000:]
		}
		if s == "" {
			return "(it wrote nothing)"
		}
		return s
	}
	exitedErr := func() error {
		return fmt.Errorf("adapter %s: the gateway exited (%v) before it served, started as %q: fix command (or configTemplate, the config it reads). Its output:\n%s",
			a.file, waitErr, argv, output())
	}
	if a.Transport == "stdio" {
		select {
		case <-g.exited:
			return exitedErr()
		case <-time.After(2 * time.Second):
			return nil // its clients are its stdin and stdout: the cases speak for themselves
		}
	}

	u, err := url.Parse(g.url)
	if err != nil || u.Host == "" {
		return fmt.Errorf("adapter %s: url %q is not an http:// URL: fix url", a.file, g.url)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443"}[u.Scheme]+map[string]string{"http": "80"}[u.Scheme])
	}
	// Listening: a port nobody answers is reported after a sixth of the
	// ready timeout (10 s by default), not after the whole of it.
	listenBy := time.Now().Add(a.readyFor / 6)
	for {
		select {
		case <-g.exited:
			return exitedErr()
		default:
		}
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(listenBy) {
			return fmt.Errorf("adapter %s: url %s: nothing answers at %s %s after the gateway started, and it still runs (%v): fix url, or command: the gateway must listen on {{.Port}} (%d here). Its output:\n%s",
				a.file, g.url, host, a.readyFor/6, err, port, output())
		}
		time.Sleep(100 * time.Millisecond) // nothing to wait on but the port
	}
	// MCP at the URL, and the server's tools under toolName.
	want, err := renderErr("toolName", a.ToolName, templateData{Server: "pre", Tool: "pre_whoami"})
	if err != nil {
		return fmt.Errorf("%v: fix the template", err)
	}
	deadline := time.Now().Add(a.readyFor)
	var last error
	var names []string
	var notFoundSince time.Time
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return exitedErr()
		default:
		}
		s, err := g.trySession()
		if err == nil {
			names, err = s.toolNames()
			s.close()
			if err == nil && contains(names, want) {
				return nil
			}
			for _, n := range names {
				if err == nil && strings.Contains(n, "pre_whoami") {
					// The server's tool is listed, under another name.
					return fmt.Errorf("adapter %s: toolName: the gateway lists tool pre_whoami of server pre as %q, and toolName gives %q: fix toolName", a.file, n, want)
				}
			}
		}
		last = err
		// A path nobody serves answers 404 (or 405) from the start; give
		// a gateway that is still setting up its routes 3 s.
		if err != nil && (strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "405")) {
			if notFoundSince.IsZero() {
				notFoundSince = time.Now()
			} else if time.Since(notFoundSince) > 3*time.Second {
				return fmt.Errorf("adapter %s: url %s answers %v: fix url's path, or transport (%s)", a.file, g.url, err, a.Transport)
			}
		} else {
			notFoundSince = time.Time{}
		}
		time.Sleep(200 * time.Millisecond) // gateways announce readiness in ways of their own
	}
	if last == nil {
		return fmt.Errorf("adapter %s: toolName: the gateway lists %q, and none is %q, the name toolName gives tool pre_whoami of server pre: fix toolName (or configTemplate, if the server is missing)",
			a.file, names, want)
	}
	return fmt.Errorf("adapter %s: url %s: no MCP session within %s: %v: fix url or transport (%s). Its output:\n%s", a.file, g.url, a.readyFor, last, a.Transport, output())
}
