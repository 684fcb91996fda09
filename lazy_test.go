package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// startLazyGateway is startGateway with the state directory dir given, so
// that two gateways in a row run servers with the same config (and cache
// key), and every "CACHE" in configJSON standing for cache. stop stops the
// gateway and checks that nothing of dir is left; it runs at the test's end
// too, and may be called twice.
func startLazyGateway(t *testing.T, configJSON, dir, cache string) (tg *testGateway, stop func()) {
	t.Helper()
	path := writeConfig(t, strings.ReplaceAll(configJSON, "CACHE", cache), dir)
	cfg, err := LoadConfig(path, func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	gw := NewGateway(cfg, testLogger(t), nil)
	gw.Start()
	h := newHTTPFrontEnd(gw, true, testLogger(t))
	ts := httptest.NewUnstartedServer(h)
	ts.Config = newHTTPServer(h, testLogger(t))
	ts.Start()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			h.shutdown()
			ts.Close()
			gw.Stop(nil)
			requireGone(t, dir)
		})
	}
	t.Cleanup(stop)
	for _, b := range gw.backends {
		<-b.firstDone
	}
	return &testGateway{gw: gw, h: h, url: ts.URL + mcpPath, dir: dir}, stop
}

// lastProcess returns the backend's last process, which must exist.
func lastProcess(t *testing.T, b *backend) *process {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		t.Fatalf("backend %q has started no process", b.name)
	}
	return b.proc
}

// waitExit waits for process p to exit and be reaped.
func waitExit(t *testing.T, p *process, what string) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("process %d did not exit within 15s: %s", p.pid, what)
	}
}

// cacheFiles returns the catalog cache files in dir.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return files
}

const lazyConfig = `{"cacheDir": "CACHE", "mcpServers": {"a": {"command": "FAKE", "start": "lazy",
	"args": ["-state", "STATE", "-lifetime", "2m"], "env": {"A_TOKEN": "hunter2-not-on-disk"}}}}`

func TestLazyServerIsListedFromItsCacheWithoutAProcessAndStartedByItsFirstCall(t *testing.T) {
	dir, cache := stateDir(t), t.TempDir()

	// A cold cache: corral starts the server once to list it, writes the
	// cache, and stops the server, which is then idle, not crashed.
	tg, stop := startLazyGateway(t, lazyConfig, dir, cache)
	b := tg.gw.backends[0]
	waitState(t, b, stateIdle, 15*time.Second)
	waitExit(t, lastProcess(t, b), "the listing run of a lazy server is stopped")
	if n := len(fakeProcesses(t, dir)); n != 1 {
		t.Fatalf("a cold start ran %d processes, want 1", n)
	}
	files := cacheFiles(t, cache)
	if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "a-") {
		t.Fatalf("cache files = %q, want one of server a", files)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.Contains(string(data), `"whoami"`) || strings.Contains(string(data), "hunter2") {
		t.Errorf("cache file %s = %s, want the tools and no env value", files[0], data)
	}
	if h := b.health(); h.Restarts != 0 || h.LastExit != "" || h.PID != 0 {
		t.Errorf("after the listing run, health = %+v, want no restart, no exit, no PID", h)
	}
	stop()

	// A warm cache: the server is listed, and no process runs until a call.
	tg, _ = startLazyGateway(t, lazyConfig, dir, cache)
	b = tg.gw.backends[0]
	c := connect(t, tg.url)
	if names := c.listToolNames(); !strings.Contains(strings.Join(names, ","), "whoami") {
		t.Fatalf("tools of an idle lazy server = %q, want its cached tools", names)
	}
	if n, live := len(fakeProcesses(t, dir)), liveMarked(dir); n != 1 || len(live) != 0 {
		t.Fatalf("with a warm cache, %d processes ran (live %v), want only the earlier one", n, live)
	}
	if report, ok := tg.gw.health(); !ok || report.Backends[0].State != stateIdle {
		t.Errorf("health = %+v, ok %v; want ok with the server idle", report, ok)
	}
	var metrics strings.Builder
	writeMetrics(&metrics, tg.gw, tg.h)
	if !strings.Contains(metrics.String(), `corral_server_state{server="a",state="idle"} 1`) {
		t.Errorf("/metrics does not show server a idle:\n%s", metrics.String())
	}
	if got := toolText(t, c.callTool("1", "whoami", "{}")); !strings.Contains(got, `"name":"fake"`) {
		t.Errorf("first call answered %s", got)
	}
	if n := len(fakeProcesses(t, dir)); n != 2 {
		t.Errorf("after the first call %d processes ran, want 2", n)
	}
	if s := b.snapshot(); s != stateReady {
		t.Errorf("after the first call the server is %s, want ready", s)
	}
}

func TestACorruptCatalogCacheIsIgnoredAndWrittenAgain(t *testing.T) {
	dir, cache := stateDir(t), t.TempDir()
	tg, stop := startLazyGateway(t, lazyConfig, dir, cache)
	waitState(t, tg.gw.backends[0], stateIdle, 15*time.Second)
	stop()
	file := cacheFiles(t, cache)[0]
	for _, bad := range []string{`{"version":1,"server":"a","lists":{"tools":[{"nam`, `{"version":99,"server":"a"}`, `{"version":1,"server":"a","lists":{"tools":[{}]}}`} {
		if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		before := len(fakeProcesses(t, dir))
		tg, stop := startLazyGateway(t, lazyConfig, dir, cache)
		waitState(t, tg.gw.backends[0], stateIdle, 15*time.Second)
		stop()
		if n := len(fakeProcesses(t, dir)); n != before+1 {
			t.Errorf("with cache %s, %d processes ran, want one to list the server again", bad, n-before)
		}
		if _, err := newCatalogCache(cache, tg.gw.config(), tg.gw.config().Servers()[0]).load(); err != nil {
			t.Errorf("with cache %s, the cache was not written again: %v", bad, err)
		}
	}
}

func TestTheCatalogCacheKeyChangesWithWhatCanChangeTheCatalog(t *testing.T) {
	cfg := &Config{file: "/etc/corral/corral.json"}
	base := func() *ServerConfig {
		return &ServerConfig{Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"K": "v"}, Cwd: "work", name: "a"}
	}
	key := catalogKey(cfg, base())
	if again := catalogKey(cfg, base()); again != key {
		t.Fatalf("the same config gave keys %s and %s", key, again)
	}
	for name, change := range map[string]func(s *ServerConfig){
		"args":    func(s *ServerConfig) { s.Args = append(s.Args, "--verbose") },
		"env":     func(s *ServerConfig) { s.Env["K"] = "w" },
		"command": func(s *ServerConfig) { s.Command = "node" },
		"cwd":     func(s *ServerConfig) { s.Cwd = "elsewhere" },
		"headers": func(s *ServerConfig) { s.Headers = map[string]string{"Authorization": "Bearer x"} },
		"url":     func(s *ServerConfig) { s.URL = "https://example.com/mcp" },
	} {
		s := base()
		change(s)
		if got := catalogKey(cfg, s); got == key {
			t.Errorf("a change of %s left the key %s", name, key)
		}
	}
	if other := catalogKey(&Config{file: "/srv/corral.json"}, base()); other == key {
		t.Errorf("a relative cwd from another config directory left the key %s", key)
	}
}

func TestACallWhoseDeadlineEndsWhileALazyServerStartsGetsATimeoutNamingIt(t *testing.T) {
	dir, cache := stateDir(t), t.TempDir()
	config := `{"cacheDir": "CACHE", "requestTimeout": "300ms", "mcpServers": {"slow": {"command": "FAKE", "start": "lazy",
		"args": ["-state", "STATE", "-lifetime", "2m", "-start-delay", "1s"]}}}`
	tg, _ := startLazyGateway(t, config, dir, cache)
	b := tg.gw.backends[0]
	waitState(t, b, stateIdle, 15*time.Second)
	c := connect(t, tg.url)
	m := c.callTool("1", "whoami", "{}")
	if m.Error == nil || m.Error.Code != codeTimeout || !strings.Contains(m.Error.Message, `server "slow" was not ready by the call's deadline`) {
		t.Fatalf("a call during a slow start answered %+v, want a timeout naming the server", m)
	}
	waitState(t, b, stateReady, 15*time.Second) // the start goes on
	if got := toolText(t, c.callTool("2", "whoami", "{}")); !strings.Contains(got, "pid") {
		t.Errorf("a call once started answered %s", got)
	}
}

const idleConfig = `{"mcpServers": {"a": {"command": "FAKE", "idleStop": "200ms",
	"args": ["-state", "STATE", "-lifetime", "2m"]}}}`

func TestIdleStopStopsAnIdleServerAndTheNextCallStartsItWithoutCountingACrash(t *testing.T) {
	tg := startGateway(t, idleConfig)
	b := tg.gw.backends[0]
	first := lastProcess(t, b)
	waitExit(t, first, "an idle server is stopped after idleStop")
	waitState(t, b, stateIdle, 15*time.Second)
	if h := b.health(); h.Restarts != 0 || h.LastExit != "" || h.PID != 0 || h.Error != "" {
		t.Errorf("an idle server's health = %+v, want no restart, exit, PID or error", h)
	}
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("1", "whoami", "{}")); strings.Contains(got, fmt.Sprintf(`"pid":%d}`, first.pid)) {
		t.Errorf("the call after an idle stop answered %s, from the stopped process", got)
	}
	if n := len(fakeProcesses(t, tg.dir)); n != 2 {
		t.Errorf("%d processes ran, want 2", n)
	}
	if b.restarts != 0 {
		t.Errorf("restarts = %d after an idle stop, want 0", b.restarts)
	}
}

func TestIdleStopSparesAServerWithACallInFlightOrASubscription(t *testing.T) {
	tg := startGateway(t, idleConfig)
	b := tg.gw.backends[0]
	p := lastProcess(t, b)
	c := connect(t, tg.url)

	// A call four times as long as idleStop is answered by the same process.
	if got := toolText(t, c.callTool("1", "sleep", `{"ms": 800}`)); got != "slept" {
		t.Errorf("sleep answered %q", got)
	}
	if closed(p.exited) {
		t.Fatal("the server was stopped while a call was in flight")
	}

	// A subscription holds it up; when it ends, the server is stopped.
	if m := c.request("2", "resources/subscribe", `{"uri":"fake://a/counter"}`); m.Error != nil {
		t.Fatalf("subscribe: %+v", m.Error)
	}
	timer := time.NewTimer(800 * time.Millisecond) // nothing to wait on: the server must not stop
	select {
	case <-p.exited:
		t.Fatal("the server was stopped while a session subscribed to its resource")
	case <-timer.C:
	}
	if m := c.request("3", "resources/unsubscribe", `{"uri":"fake://a/counter"}`); m.Error != nil {
		t.Fatalf("unsubscribe: %+v", m.Error)
	}
	waitExit(t, p, "the server is stopped once the subscription ended")
}

func TestStartAndIdleStopAreCheckedWithClearErrors(t *testing.T) {
	for _, tc := range []struct{ name, config, want string }{
		{"an unknown start", `{"mcpServers": {"a": {"command": "x", "start": "later"}}}`, `mcpServers.a.start: unknown value "later"; write "eager"`},
		{"a negative idleStop", `{"mcpServers": {"a": {"command": "x", "idleStop": "-1s"}}}`, `mcpServers.a.idleStop: must not be negative`},
		{"a negative top-level idleStop", `{"idleStop": "-1s", "mcpServers": {}}`, `idleStop: must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("corral.json", []byte(tc.config), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseConfig(%s) = %v, want an error containing %q", tc.config, err, tc.want)
			}
		})
	}
}

func TestALazyServerWhoseToolsChangedSinceTheCacheSendsListChangedOnceStarted(t *testing.T) {
	dir, cache := stateDir(t), t.TempDir()
	tg, stop := startLazyGateway(t, lazyConfig, dir, cache)
	waitState(t, tg.gw.backends[0], stateIdle, 15*time.Second)
	stop()

	// The cache says the server has no whoami: as if it gained it since.
	file := cacheFiles(t, cache)[0]
	data, _ := os.ReadFile(file)
	var cc cachedCatalog
	if err := json.Unmarshal(data, &cc); err != nil {
		t.Fatal(err)
	}
	tools := cc.Lists["tools"][:0]
	for _, raw := range cc.Lists["tools"] {
		if !strings.Contains(string(raw), `"whoami"`) {
			tools = append(tools, raw)
		}
	}
	cc.Lists["tools"] = tools
	data, _ = json.Marshal(cc)
	os.WriteFile(file, data, 0o600)

	tg, _ = startLazyGateway(t, lazyConfig, dir, cache)
	p := newHTTPPeer(t, tg.url, "{}")
	if names := p.listAll("tools/list", "tools", "name"); slices.Contains(names, "whoami") {
		t.Fatalf("tools before the start = %q, want the cached ones, without whoami", names)
	}
	if m, _ := p.call("tools/call", `{"name":"echo","arguments":{"text":"hi"}}`); text(t, m) != "hi" {
		t.Errorf("echo answered %s", m.Result)
	}
	if m := p.nextExcept(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("after the start the session got %s, want tools/list_changed", m.Method)
	}
	if names := p.listAll("tools/list", "tools", "name"); !slices.Contains(names, "whoami") {
		t.Errorf("tools after the start = %q, want the live ones, with whoami", names)
	}
	if data, _ := os.ReadFile(file); !strings.Contains(string(data), `"whoami"`) {
		t.Errorf("the cache was not written again with the live tools: %s", data)
	}
}

func TestTheCatalogCacheHoldsOneFilePerServer(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{}
	u := &upstream{server: "a"}
	for _, args := range [][]string{{"-v"}, {"-q"}} {
		c := newCatalogCache(dir, cfg, &ServerConfig{Command: "x", Args: args, name: "a"})
		if err := c.save(u.cached("")); err != nil {
			t.Fatal(err)
		}
	}
	other := newCatalogCache(dir, cfg, &ServerConfig{Command: "x", name: "a-b"})
	if err := other.save((&upstream{server: "a-b"}).cached("")); err != nil {
		t.Fatal(err)
	}
	if files := cacheFiles(t, dir); len(files) != 2 {
		t.Errorf("cache files = %q, want one of server a (the last config's) and one of server a-b", files)
	}
}

// startGatewayLogging starts a gateway with the config file at path, whose
// servers record their state in dir, and returns it with its log. The
// gateway is stopped, and dir's processes checked gone, when the test ends.
func startGatewayLogging(t *testing.T, path, dir string) (*Gateway, *lockedBuffer) {
	t.Helper()
	cfg, err := LoadConfig(path, func(string) (string, bool) { return "", false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := new(lockedBuffer)
	gw := NewGateway(cfg, slog.New(slog.NewTextHandler(log, nil)), nil)
	gw.Start()
	t.Cleanup(func() { gw.Stop(nil); requireGone(t, dir) })
	return gw, log
}

// lockedBuffer is a log destination safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestWithoutACacheDirectoryLazyServersAreListedAtStartupAndTheLogSaysWhyOnce(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	dir := stateDir(t)
	path := writeConfig(t, `{"mcpServers": {
		"a": {"command": "FAKE", "start": "lazy", "args": ["-state", "STATE", "-lifetime", "2m", "-name", "a"]},
		"b": {"command": "FAKE", "start": "lazy", "args": ["-state", "STATE", "-lifetime", "2m", "-name", "b"]}}}`, dir)
	gw, log := startGatewayLogging(t, path, dir)
	for _, b := range gw.backends {
		waitState(t, b, stateIdle, 15*time.Second)
		waitExit(t, lastProcess(t, b), "a lazy server listed at startup is stopped")
		if len(b.items(kindTool)) == 0 {
			t.Errorf("server %q lists no tools", b.name)
		}
	}
	if n := strings.Count(log.String(), "lazy servers are started at startup to list them"); n != 1 {
		t.Errorf("the log says %d times why lazy servers are started, want once:\n%s", n, log.String())
	}
}

func TestCheckShowsStartAndTheCacheDirectoryResolved(t *testing.T) {
	cfg, err := ParseConfig("/etc/corral/corral.json", []byte(`{"cacheDir": "cache", "mcpServers": {"a": {"command": "x", "start": "lazy"}, "b": {"command": "y"}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := string(cfg.resolved())
	for _, want := range []string{`"cacheDir": "/etc/corral/cache"`, `"start": "lazy"`, `"start": "eager"`} {
		if !strings.Contains(out, want) {
			t.Errorf("-check output lacks %s:\n%s", want, out)
		}
	}
}

func TestTheStatusPageShowsIdleServersAsIdleWithoutAPID(t *testing.T) {
	st := gatewayStatus{Time: time.Now(), Servers: []serverStatus{
		{health: health{Name: "a", State: stateReady, PID: 10}},
		{health: health{Name: "b", State: stateIdle, PID: 11}},
	}}
	var page bytes.Buffer
	if err := statusTemplate.Execute(&page, newStatusView(st, time.Now())); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 of 2 servers ready, 1 idle", `data-state="idle"`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the status page lacks %s:\n%s", want, page.String())
		}
	}
	if strings.Contains(page.String(), ">11<") {
		t.Errorf("the status page shows the PID of an idle server's last process")
	}
}

func TestACatalogCacheOverTheServersBoundsIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := &ServerConfig{Command: "x", name: "a", MaxCatalogItems: 2}
	c := newCatalogCache(dir, &Config{}, s)
	u := &upstream{server: "a"}
	for _, name := range []string{"t1", "t2", "t3"} {
		u.lists[kindTool] = append(u.lists[kindTool], backendItem{name: name, raw: json.RawMessage(`{"name":"` + name + `"}`)})
	}
	if err := c.save(u.cached("")); err != nil {
		t.Fatal(err)
	}
	if _, err := newCatalogCache(dir, &Config{}, s).load(); err == nil || !strings.Contains(err.Error(), "maxCatalogItems") {
		t.Errorf("load of 3 items with maxCatalogItems 2 = %v, want an error naming maxCatalogItems", err)
	}
	s.MaxCatalogItems = 3
	if cc, err := newCatalogCache(dir, &Config{}, s).load(); err != nil || len(cc.Lists["tools"]) != 3 {
		t.Errorf("load of 3 items with maxCatalogItems 3 = %v, %v; want the 3 tools", cc, err)
	}
}

func TestSweepCatalogCacheRemovesOnlyItsConfigsFilesOfServersThatAreGone(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	parse := func(path, src string) *Config {
		t.Helper()
		cfg, err := ParseConfig(path, []byte(src), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	mine, theirs := filepath.Join(dir, "corral.json"), filepath.Join(dir, "other.json")
	files := map[string]string{} // server -> its file
	for path, src := range map[string]string{
		mine:   `{"cacheDir":"cache","mcpServers":{"a":{"command":"x","start":"lazy"},"gone":{"command":"y","start":"lazy"},"now-eager":{"command":"z","start":"lazy"}}}`,
		theirs: `{"cacheDir":"cache","mcpServers":{"theirs":{"command":"q","start":"lazy"}}}`,
	} {
		cfg := parse(path, src)
		for _, s := range cfg.Servers() {
			c := newCatalogCache(cache, cfg, s)
			if err := c.save((&upstream{server: s.Name()}).cached("")); err != nil {
				t.Fatal(err)
			}
			files[s.Name()] = c.path
		}
	}
	gone, _ := os.ReadFile(files["gone"])
	for _, name := range []string{"notes.json", "gone-1234.json", "gone-" + strings.Repeat("A", 32) + ".json"} {
		os.WriteFile(filepath.Join(cache, name), gone, 0o600) // not named as corral names its files
	}

	removed := sweepCatalogCache(parse(mine, `{"cacheDir":"cache","mcpServers":{"a":{"command":"x","start":"lazy"},"now-eager":{"command":"z"}}}`))
	slices.Sort(removed)
	if want := []string{files["gone"], files["now-eager"]}; !slices.Equal(removed, want) {
		t.Errorf("sweepCatalogCache removed %q, want %q", removed, want)
	}
	var left []string
	for _, f := range cacheFiles(t, cache) {
		left = append(left, filepath.Base(f))
	}
	want := []string{"gone-1234.json", "gone-" + strings.Repeat("A", 32) + ".json", "notes.json", filepath.Base(files["a"]), filepath.Base(files["theirs"])}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("files left = %q, want %q", left, want)
	}
}

func TestALazyServerRemovedByAReloadLeavesNoCacheFile(t *testing.T) {
	dir, cache := stateDir(t), t.TempDir()
	tg, _ := startLazyGateway(t, lazyConfig, dir, cache)
	waitState(t, tg.gw.backends[0], stateIdle, 15*time.Second)
	if files := cacheFiles(t, cache); len(files) != 1 {
		t.Fatalf("cache files = %q, want the lazy server's", files)
	}
	cfg, err := ParseConfig(tg.gw.config().file, []byte(`{"cacheDir": "`+cache+`", "mcpServers": {"b": {"command": "`+fakeserverBin+`",
		"args": ["-state", "`+dir+`", "-lifetime", "2m"]}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := tg.gw.Reload(cfg); !slices.Equal(r.Removed, []string{"a"}) {
		t.Fatalf("Reload removed %q, want a", r.Removed)
	}
	if files := cacheFiles(t, cache); len(files) != 0 {
		t.Errorf("cache files after the reload removed the server = %q, want none", files)
	}
}
