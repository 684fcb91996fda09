package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listenerEnv, set in its environment, makes the test binary a
// prerequisite (see runListener) that listens on the variable's value, or
// on nothing if it is empty. listenerKeepEnv, set, keeps it running after
// its stdin ends.
const (
	listenerEnv     = "CORRAL_TEST_LISTEN"
	listenerKeepEnv = "CORRAL_TEST_LISTEN_KEEP"
)

// runListener is the test binary playing a prerequisite: it records events
// in dir/listener-PID.events ("start", with the marker it got, "listening",
// "exit", with why), listens on addr (unless empty), accepting and closing
// connections, and exits on SIGTERM or SIGINT, at the end of its stdin
// (unless listenerKeepEnv is set) or after 2m, whatever happens.
func runListener(addr, dir string) int {
	events := filepath.Join(dir, "listener-"+strconv.Itoa(os.Getpid())+".events")
	record := func(event, detail string) {
		line, _ := json.Marshal(map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "event": event, "detail": detail})
		f, err := os.OpenFile(events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			f.Write(append(line, '\n'))
			f.Close()
		}
	}
	record("start", os.Getenv(envInstance))
	exit := make(chan string, 3)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { exit <- "signal " + (<-sigs).String() }()
	time.AfterFunc(2*time.Minute, func() { exit <- "lifetime" })
	if _, keep := os.LookupEnv(listenerKeepEnv); !keep {
		go func() {
			bufio.NewReader(os.Stdin).WriteTo(nopWriter{})
			exit <- "stdin closed"
		}()
	}
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			record("exit", "listen: "+err.Error())
			return 1
		}
		record("listening", addr)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	record("exit", <-exit)
	return 0
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }

// listenerEvent is a line of a listener's events file.
type listenerEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Detail string    `json:"detail"`
}

// listeners returns the events of every listener that recorded in dir, by
// PID.
func listeners(t *testing.T, dir string) map[int][]listenerEvent {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "listener-*.events"))
	out := map[int][]listenerEvent{}
	for _, f := range files {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "listener-"), ".events"))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e listenerEvent
			if json.Unmarshal([]byte(line), &e) == nil {
				out[pid] = append(out[pid], e)
			}
		}
	}
	return out
}

// eventOf returns the listener's first event named name.
func eventOf(events []listenerEvent, name string) (listenerEvent, bool) {
	i := slices.IndexFunc(events, func(e listenerEvent) bool { return e.Event == name })
	if i < 0 {
		return listenerEvent{}, false
	}
	return events[i], true
}

// freePort returns a loopback address with a port no one listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// prereqJSON returns a prerequisite entry that runs the test binary as a
// listener on listen (or on nothing), recording in STATE, ready when addr
// accepts connections; an unmanaged one keeps running after its stdin ends.
func prereqJSON(t *testing.T, listen, addr string, unmanaged bool) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf(`%q:%q`, listenerEnv, listen)
	extra := ""
	if unmanaged {
		env += fmt.Sprintf(`,%q:"1"`, listenerKeepEnv)
		extra = `,"managed":false`
	}
	return fmt.Sprintf(`{"command":%q,"args":["STATE"],"env":{%s},"ready":{"tcp":%q}%s}`, self, env, addr, extra)
}

func TestPrerequisiteStartsBeforeItsServerAndStopsAfterIt(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"],"prerequisite":`+prereqJSON(t, addr, addr, false)+`}}}`)
	if h := tg.gw.backends[0].health(); h.State != stateReady {
		t.Fatalf("server with a prerequisite: %+v", h)
	}
	servers := fakeProcesses(t, tg.dir)
	ls := listeners(t, tg.dir)
	if len(servers) != 1 || len(ls) != 1 {
		t.Fatalf("%d servers and %d prerequisites started, want 1 and 1", len(servers), len(ls))
	}
	var pid int
	var events []listenerEvent
	for pid, events = range ls {
	}
	listening, _ := eventOf(events, "listening")
	if !listening.Time.Before(servers[0].Start) {
		t.Errorf("the prerequisite listened at %v, the server started at %v: want the prerequisite ready first", listening.Time, servers[0].Start)
	}
	if start, _ := eventOf(events, "start"); start.Detail == "" {
		t.Errorf("a managed prerequisite got no marker in its environment")
	}

	tg.gw.Stop(nil)
	serverExit, ok := fakeEventTime(t, tg.dir, servers[0].PID, "exit")
	if !ok {
		t.Fatalf("the server did not record its exit")
	}
	exit, ok := eventOf(listeners(t, tg.dir)[pid], "exit")
	if !ok || exit.Detail != "stdin closed" {
		t.Fatalf("the prerequisite's exit = %+v, want one at the end of its stdin (the stop ladder's first step)", exit)
	}
	if !exit.Time.After(serverExit) {
		t.Errorf("the prerequisite exited at %v, the server at %v: want the server first", exit.Time, serverExit)
	}
}

// fakeEventTime returns the time of the last event named name that
// fakeserver pid recorded in dir.
func fakeEventTime(t *testing.T, dir string, pid int, name string) (time.Time, bool) {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid)+".events"))
	var last time.Time
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		var e struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Event == name {
			last, found = e.Time, true
		}
	}
	return last, found
}

func TestPrerequisiteAlreadyListeningIsNotStartedAgain(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"],"prerequisite":`+prereqJSON(t, addr, addr, false)+`}}}`)
	if h := tg.gw.backends[0].health(); h.State != stateReady {
		t.Fatalf("server whose prerequisite already runs: %+v", h)
	}
	if ls := listeners(t, tg.dir); len(ls) != 0 {
		t.Errorf("a second prerequisite was started while its address accepted connections: %v", ls)
	}
}

func TestPrerequisiteNotReadyFailsItsServerWithWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	for _, tc := range []struct {
		name, pre, want string
	}{
		{"never listening", prereqJSON(t, "", addr, false),
			`server "a": its prerequisite %q did not accept connections at ` + addr + ` (ready.tcp) within 500ms (startTimeout)`},
		{"exiting at once", `{"command":"/bin/sh","args":["-c","echo no database here >&2; exit 7"],"ready":{"tcp":"` + addr + `"}}`,
			`server "a": its prerequisite "/bin/sh" exited (exit status 7) before it was ready; its last output line: no database here`},
		{"a delay past startTimeout", `{"command":"/bin/sh","args":["-c","sleep 10 # STATE"],"ready":{"delay":"5s"}}`,
			`server "a": waiting 5s (ready.delay) for its prerequisite "/bin/sh" would take longer than startTimeout (500ms)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := startGateway(t, `{"startTimeout":"500ms","maxRestarts":1,"restartDelay":"10s","mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"],"prerequisite":`+tc.pre+`}}}`)
			want := tc.want
			if strings.Contains(want, "%q") {
				self, _ := os.Executable()
				want = fmt.Sprintf(want, self)
			}
			if h := tg.gw.backends[0].health(); h.State == stateReady || !strings.Contains(h.Error, want) {
				t.Errorf("health = %+v, want an error saying %q", h, want)
			}
			if n := len(fakeProcesses(t, tg.dir)); n != 0 {
				t.Errorf("%d servers started, want none", n)
			}
			for pid := range listeners(t, tg.dir) {
				if gone, _, _ := procState(pid); !gone {
					t.Errorf("the prerequisite %d that was not ready is still running", pid)
				}
			}
		})
	}
}

func TestPrerequisiteDeathRestartsItsServerWithIt(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	tg := startGateway(t, `{"restartDelay":"50ms","mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"],"prerequisite":`+prereqJSON(t, addr, addr, false)+`}}}`)
	first := fakeProcesses(t, tg.dir)[0].PID
	var pre int
	for pre = range listeners(t, tg.dir) {
	}
	if pre <= 0 {
		t.Fatalf("no prerequisite started")
	}
	syscall.Kill(pre, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "a new prerequisite and a new server", func() bool {
		return len(listeners(t, tg.dir)) == 2 && len(fakeProcesses(t, tg.dir)) == 2 && tg.gw.backends[0].snapshot() == stateReady
	})
	if gone, _, _ := procState(first); !gone {
		t.Errorf("the server whose prerequisite died still runs")
	}
	if h := tg.gw.backends[0].health(); h.Restarts != 1 {
		t.Errorf("health after the prerequisite died = %+v, want one restart", h)
	}
}

func TestUnmanagedPrerequisiteIsLeftRunningUnmarkedWhenCorralExits(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			testPrerequisitesWhenCorralExits(t, sig)
		})
	}
}

// testPrerequisitesWhenCorralExits ends corral with sig, and checks that its
// managed prerequisite is gone with it (stopped, or killed by its
// parent-death signal) and that its unmanaged one is left running,
// unmarked.
func testPrerequisitesWhenCorralExits(t *testing.T, sig syscall.Signal) {
	managed, unmanaged := freePort(t), freePort(t)
	c := startCorral(t, `{"listen":"127.0.0.1:0","mcpServers":{
		"a":{"command":"FAKE","args":["-state","STATE","-name","a","-prefix","a_"],"prerequisite":`+prereqJSON(t, managed, managed, false)+`},
		"b":{"command":"FAKE","args":["-state","STATE","-name","b","-prefix","b_"],"prerequisite":`+prereqJSON(t, unmanaged, unmanaged, true)+`}}}`)
	c.waitHTTP(2)
	byAddr := map[string]int{}
	for pid, events := range listeners(t, c.dir) {
		if e, ok := eventOf(events, "listening"); ok {
			byAddr[e.Detail] = pid
		}
	}
	kept := byAddr[unmanaged]
	if kept <= 0 || byAddr[managed] <= 0 {
		t.Fatalf("prerequisites listening: %v, want one at %s and one at %s", byAddr, managed, unmanaged)
	}
	t.Cleanup(func() { syscall.Kill(kept, syscall.SIGKILL) })
	c.waitLog(`the prerequisite is left to run on its own`)
	c.cmd.Process.Signal(sig)
	if code := c.waitExit(30 * time.Second); sig == syscall.SIGTERM && code != 0 {
		t.Fatalf("corral exited with %d", code)
	}
	waitFor(t, 5*time.Second, "the managed prerequisite to go with corral", func() bool {
		gone, _, _ := procState(byAddr[managed])
		return gone
	})
	if gone, _, _ := procState(kept); gone {
		t.Fatalf("the unmanaged prerequisite (%d) did not outlive corral", kept)
	}
	if start, _ := eventOf(listeners(t, c.dir)[kept], "start"); start.Detail != "" {
		t.Errorf("the unmanaged prerequisite carries the marker %s=%s", envInstance, start.Detail)
	}
	if err := dialReady(unmanaged, time.Second); err != nil {
		t.Errorf("the unmanaged prerequisite no longer serves: %v", err)
	}
	syscall.Kill(kept, syscall.SIGKILL)
	waitFor(t, 5*time.Second, "the unmanaged prerequisite to be gone", func() bool { gone, _, _ := procState(kept); return gone })
}

func TestPrerequisiteConfigErrorsNameTheServerAndTheField(t *testing.T) {
	for _, tc := range []struct{ name, pre, want string }{
		{"not an object", `"pg"`, `mcpServers.a.prerequisite: want an object such as {"command": "...", "ready": {"tcp": "127.0.0.1:5432"}}, got string`},
		{"no command", `{"ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.command: required`},
		{"an unknown key", `{"command":"pg","redy":{"delay":"1s"}}`, `mcpServers.a.prerequisite: unknown field "redy"; did you mean "ready"?`},
		{"no ready check", `{"command":"pg"}`, `mcpServers.a.prerequisite.ready: required: {"tcp": "host:port"}`},
		{"both ready checks", `{"command":"pg","ready":{"tcp":"127.0.0.1:1","delay":"1s"}}`, `mcpServers.a.prerequisite.ready: set "tcp" or "delay", not both`},
		{"an unknown ready check", `{"command":"pg","ready":{"http":"x"}}`, `mcpServers.a.prerequisite.ready: unknown field "http"`},
		{"a bad address", `{"command":"pg","ready":{"tcp":"localhost"}}`, `mcpServers.a.prerequisite.ready.tcp: invalid address "localhost"`},
		{"a bad port", `{"command":"pg","ready":{"tcp":"localhost:99999"}}`, `mcpServers.a.prerequisite.ready.tcp: invalid address "localhost:99999"; write a host and a port number`},
		{"a bad delay", `{"command":"pg","ready":{"delay":"soon"}}`, `mcpServers.a.prerequisite.ready.delay: invalid duration "soon"`},
		{"a negative delay", `{"command":"pg","ready":{"delay":"-1s"}}`, `mcpServers.a.prerequisite.ready.delay: must be positive`},
		{"unmanaged with a delay", `{"command":"pg","managed":false,"ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.ready: an unmanaged prerequisite ("managed": false) needs a "tcp" check`},
		{"managed not a bool", `{"command":"pg","managed":"no","ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.managed: want true or false, got string`},
		{"args not strings", `{"command":"pg","args":[1],"ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.args: want an array of strings, got number`},
		{"a bad env name", `{"command":"pg","env":{"A=B":"x"},"ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.env: invalid variable name "A=B"`},
		{"an unset variable", `{"command":"${NOPE}","ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.command: `},
		{"a file outside env", `{"command":"pg","args":["${file:x}"],"ready":{"delay":"1s"}}`, `mcpServers.a.prerequisite.args[0]: ${file:x}: a file is read only in env and headers values`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("config.json", []byte(`{"mcpServers":{"a":{"command":"x","prerequisite":`+tc.pre+`}}}`), func(string) (string, bool) { return "", false }, nil)
			if err == nil || !strings.Contains(err.Error(), "config.json: "+tc.want) {
				t.Errorf("ParseConfig = %v, want an error containing %q", err, "config.json: "+tc.want)
			}
		})
	}
}

func TestPrerequisiteEnvIsMaskedByCheck(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("hunter2\n"), 0o600)
	cfg, err := ParseConfig(filepath.Join(dir, "config.json"), []byte(`{"mcpServers":{"a":{"command":"x","prerequisite":{"command":"pg","args":["--user=${DBUSER}"],"env":{"PW":"${file:pw}","PLAIN":"p"},"ready":{"tcp":"127.0.0.1:5432"}}}}}`),
		func(name string) (string, bool) { return "dbuser7", name == "DBUSER" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.MCPServers["a"].Prerequisite; got.Env["PW"] != "hunter2" || got.Args[0] != "--user=dbuser7" || !got.managed() {
		t.Errorf("prerequisite = %+v, want its references expanded and managed", got)
	}
	out := string(cfg.resolved())
	for _, secret := range []string{"hunter2", "dbuser7", `"p"`} {
		if strings.Contains(out, secret) {
			t.Errorf("-check prints %s:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, `"--user=${****}"`) && !strings.Contains(out, `"--user=****"`) {
		t.Errorf("-check does not show the prerequisite's args masked:\n%s", out)
	}
}

func TestAPrerequisiteSlowToStopIsCalledAPrerequisiteInTheLog(t *testing.T) {
	dir := stateDir(t)
	var log lockedBuffer
	b := &backend{name: "a", gcfg: &Config{StopGrace: Duration(50 * time.Millisecond), KillGrace: Duration(5 * time.Second)},
		log: slog.New(slog.NewTextHandler(&log, nil))}
	spec := b.prereqSpec(&Prerequisite{Command: fakeserverBin, Args: fakeArgs(dir, "-ignore-stdin-close")})
	p, err := startProcess(spec)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(nil) // stdin closed, then SIGTERM after stopGrace
	if !strings.Contains(log.String(), `msg="prerequisite did not exit after stdin was closed; sending SIGTERM"`) {
		t.Errorf("the stop of a prerequisite is logged as:\n%s\nwant it called a prerequisite", log.String())
	}
}
