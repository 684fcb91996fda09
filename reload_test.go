package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReloadAppliesOnlyTheDifference(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"keep":   {"command":"FAKE","args":["-state","STATE","-name","keep","-prefix","k_"]},
		"change": {"command":"FAKE","args":["-state","STATE","-name","change","-prefix","c_"]},
		"remove": {"command":"FAKE","args":["-state","STATE","-name","remove","-prefix","r_"]}
	}}`)
	c := connect(t, tg.url)
	keepPID := serversNamed(t, tg.dir, "keep")[0].PID
	changePID := serversNamed(t, tg.dir, "change")[0].PID
	removePID := serversNamed(t, tg.dir, "remove")[0].PID

	// A call in flight on the kept server must complete across the reload.
	// It is held until the reload is done, however long that takes.
	release := t.TempDir() + "/release"
	inFlight := make(chan *wireMsg, 1)
	go func() { inFlight <- c.callTool("1", "k_wait", fmt.Sprintf(`{"file":%q}`, release)) }()
	waitFor(t, 5*time.Second, "the call to reach the kept server", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, keepPID), func(e fakeEvent) bool { return e.Tool == "k_wait" })
	})

	next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(`{"mcpServers":{
		"keep":   {"command":"FAKE","args":["-state","STATE","-name","keep","-prefix","k_"]},
		"change": {"command":"FAKE","args":["-state","STATE","-name","change","-prefix","c_","-extra-tools","1"]},
		"add":    {"command":"FAKE","args":["-state","STATE","-name","add","-prefix","a_"]}
	}}`)
	cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := tg.gw.Reload(cfg)
	want := reloadReport{Added: []string{"add"}, Removed: []string{"remove"}, Changed: []string{"change"}, Kept: []string{"keep"}}
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("Reload = %+v, want %+v", r, want)
	}
	os.WriteFile(release, nil, 0o600)
	if got := toolText(t, <-inFlight); got != "released" {
		t.Errorf("the call in flight on the kept server answered %q", got)
	}
	waitFor(t, 5*time.Second, "the removed and the changed servers' old processes to go", func() bool {
		s1, _, _ := procState(removePID)
		s2, _, _ := procState(changePID)
		return s1 && s2
	})
	if got := toolText(t, c.callTool("2", "a_whoami", `{}`)); !strings.Contains(got, `"name":"add"`) {
		t.Errorf("the added server's whoami = %q", got)
	}
	if got := toolText(t, c.callTool("3", "c_tool_000", `{}`)); !strings.Contains(got, `"name":"change"`) {
		t.Errorf("the changed server's new tool answered %q", got)
	}
	if got := toolText(t, c.callTool("4", "k_whoami", `{}`)); !strings.Contains(got, fmt.Sprintf(`"pid":%d`, keepPID)) {
		t.Errorf("the kept server answered %q, want the same process %d", got, keepPID)
	}
	if msg := c.callTool("5", "r_whoami", `{}`); msg.Error == nil {
		t.Errorf("the removed server's tool still answers: %+v", msg)
	}
}

func TestCallsCutByAReloadSayTheReloadCutThem(t *testing.T) {
	t.Parallel()
	// requestTimeout: a call the reload did not cut would end in 15 s, not
	// at the default 60 s, saying requestTimeout.
	tg := startGateway(t, `{"requestTimeout":"15s","mcpServers":{
		"change": {"command":"FAKE","args":["-state","STATE","-name","change","-prefix","c_"]},
		"remove": {"command":"FAKE","args":["-state","STATE","-name","remove","-prefix","r_"]}
	}}`)
	c := connect(t, tg.url)
	// Calls that the servers never answer: only the reload ends them.
	answers := map[string]chan *wireMsg{"change": make(chan *wireMsg, 1), "remove": make(chan *wireMsg, 1)}
	for name, answer := range answers {
		pid := serversNamed(t, tg.dir, name)[0].PID
		tool := name[:1] + "_hang"
		go func() { answer <- c.callTool(`"`+name+`"`, tool, `{}`) }()
		waitFor(t, 5*time.Second, "the call to reach "+name, func() bool {
			return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool { return e.Tool == tool })
		})
	}

	next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(`{"mcpServers":{
		"change": {"command":"FAKE","args":["-state","STATE","-name","change","-prefix","c_","-extra-tools","1"]}
	}}`)
	cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.gw.Reload(cfg)
	for name, want := range map[string]string{
		"change": `server "change" was stopped by a reload, to restart with its changed settings`,
		"remove": `server "remove" was removed from the config by a reload`,
	} {
		msg := <-answers[name]
		if msg.Error == nil || msg.Error.Code != codeUnavailable || !strings.Contains(msg.Error.Message, want) {
			t.Errorf("the call in flight on %q answered %+v, want error %d saying %q", name, msg.Error, codeUnavailable, want)
		}
	}
}

// procState reports whether pid is gone (or a zombie), from /proc.
func procState(pid int) (gone bool, state string, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true, "", nil
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return f[0] == "Z", f[0], nil
}

func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	// Long enough that only the hanging call times out on a loaded machine.
	tg := startGateway(t, `{"requestTimeout":"2s","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	for i := range 3 {
		toolText(t, c.callTool(strconv.Itoa(i), "echo", `{"text":"x"}`))
	}
	c.callTool("4", "hang", `{}`)                           // a timeout
	c.callTool("5", "echo", `{"text":"x","delay_ms":"no"}`) // the server answers an error
	resp, err := http.Get(strings.TrimSuffix(tg.url, mcpPath) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("a line that is not 'name value': %q", line)
		}
		got[name] = value
	}
	for name, want := range map[string]string{
		`corral_calls_total{server="a"}`:                            "5",
		`corral_call_timeouts_total{server="a"}`:                    "1",
		`corral_call_errors_total{server="a",kind="server_error"}`:  "1",
		`corral_call_errors_total{server="a",kind="unavailable"}`:   "0",
		`corral_call_cancellations_total{server="a"}`:               "0",
		`corral_call_duration_seconds_count{server="a"}`:            "5",
		`corral_call_duration_seconds_bucket{server="a",le="+Inf"}`: "5",
		`corral_server_state{server="a",state="ready"}`:             "1",
		`corral_server_state{server="a",state="failed"}`:            "0",
		`corral_restarts_total{server="a"}`:                         "0",
		`corral_sessions`:                                           "1",
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
}

func TestStderrLevel(t *testing.T) {
	for line, want := range map[string]string{
		"ERROR: cannot open db":                     "ERROR",
		"[warn] slow request":                       "WARN",
		"Warning: deprecated":                       "WARN",
		"debug: connecting":                         "DEBUG",
		`time=1 level=error msg="boom"`:             "ERROR",
		`{"level":"warn","msg":"careful"}`:          "WARN",
		"Server running on stdio":                   "INFO",
		"errors are counted in the error log below": "INFO",
	} {
		if got := stderrLevel(line).String(); got != want {
			t.Errorf("stderrLevel(%q) = %s, want %s", line, got, want)
		}
	}
}

func TestSIGHUPReloadsAndABadConfigChangesNothing(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"listen":"127.0.0.1:0","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a","-prefix","a_"]}}}`)
	c.waitHTTP(1)
	path := c.cmd.Args[2]
	good, _ := os.ReadFile(path)

	os.WriteFile(path, []byte(`{"mcpServers": {"a": {"comand": "x"}}}`), 0o600)
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.waitLog(`reload: the config has errors; the running config stays in force.*did you mean`)
	cl := connect(t, c.url)
	if got := toolText(t, cl.callTool("1", "a_echo", `{"text":"still"}`)); got != "still" {
		t.Errorf("after a bad reload the server answered %q", got)
	}

	added := strings.Replace(string(good), `"mcpServers":{`, `"listen":"127.0.0.1:1","mcpServers":{"b": {"command":"`+fakeserverBin+`","args":["-state","`+c.dir+`","-name","b","-prefix","b_"]},`, 1)
	added = strings.Replace(added, `"listen":"127.0.0.1:0",`, ``, 1)
	os.WriteFile(path, []byte(added), 0o600)
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.waitLog(`msg=reloaded added=\[b\] removed=\[\] changed=\[\] kept=\[a\]`)
	c.waitLog(`takes effect only when corral restarts.*listen`)
	waitFor(t, 10*time.Second, "b to serve", func() bool {
		msg := cl.callTool("2", "b_whoami", `{}`)
		return msg.Error == nil
	})
}
